"""noeira's GPT (src/nn/gpt.hpp) written in PyTorch the way nanoGPT writes it (model.py of
karpathy/nanoGPT, torch < 2.0 path): token + learned position embeddings, pre-LayerNorm blocks of
causal self-attention (one fused c_attn Linear C -> 3C, softmax(q·kᵀ/√d) with the causal mask
written out, c_proj) and an MLP (c_fc C -> 4C, GELU with the tanh approximation, c_proj), a final
LayerNorm and an LM head tied to the token embedding. No dropout, LayerNorm eps 1e-5, biases on
every Linear but the head.

One model for two users: tests/gpt_torch_check.py (float64, against one forward and vjp of
noeira) and benchmarks/pytorch_gpt.py (float32 training, the benchmark's peer), so the peer the
benchmark times is the model the test proves equal to noeira's.

NOEIRA_NAMES maps noeira's parameter walk (the names in model.h5, /params/<name>/val) to this
model's parameters; load_noeira() copies a model.h5 in by those names.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    """causal=False: every position sees every other (the ViT's encoder, tests/torch_vit.py)."""

    def __init__(self, width, heads, block, causal=True):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)  # noeira's attn.qkv: rows q, then k, then v
        self.c_proj = nn.Linear(width, width)      # attn.proj
        visible = torch.tril(torch.ones(block, block)) if causal else torch.ones(block, block)
        self.register_buffer("bias", visible.view(1, 1, block, block), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        # [B, T, C] -> [B, heads, T, D]: head h is columns h·D .. h·D + D - 1
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)    # mlp.0 (noeira's LinearGELU)
        self.c_proj = nn.Linear(4 * width, width)  # mlp.1

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width, heads, block, causal=True):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.attn = CausalSelfAttention(width, heads, block, causal)
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.mlp = MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, block, layers, heads, width):
        super().__init__()
        self.block = block
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width),
            wpe=nn.Embedding(block, width),
            h=nn.ModuleList([Block(width, heads, block) for _ in range(layers)]),
            ln_f=nn.LayerNorm(width, eps=1e-5),
        ))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied: one tensor, both gradients

    def forward(self, ids):
        """ids [B, T] int64 -> logits [B, T, vocab]."""
        t = ids.shape[1]
        assert t <= self.block, "%d tokens exceed the block size %d" % (t, self.block)
        pos = torch.arange(t, dtype=torch.long, device=ids.device)
        x = self.transformer.wte(ids) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))

    def init_like_noeira(self, generator=None):
        """noeira's GPT initialization (train/run_data.hpp model_init, nn/gpt.hpp): every matrix
        and embedding from N(0, 0.02), the residual projections (c_proj) from N(0, 0.02/√(2L))
        as GPT-2's and nanoGPT's, biases 0, LayerNorm scales 1 and shifts 0."""
        layers = len(self.transformer.h)
        for name, p in self.named_parameters():
            with torch.no_grad():
                if p.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                    p.normal_(0.0, std, generator=generator)
                elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or \
                        name.endswith("ln_f.weight"):
                    p.fill_(1.0)
                else:
                    p.zero_()


def block_names(prefix, block):
    """noeira's names of one GptBlock walked under `prefix` ("h.0") -> the Block's parameters."""
    parts = {"ln_1": block.ln_1, "attn.qkv": block.attn.c_attn, "attn.proj": block.attn.c_proj,
             "ln_2": block.ln_2, "mlp.0": block.mlp.c_fc, "mlp.1": block.mlp.c_proj}
    names = {}
    for part, m in parts.items():
        names["%s.%s.weight" % (prefix, part)] = m.weight
        names["%s.%s.bias" % (prefix, part)] = m.bias
    return names


def noeira_names(model):
    """noeira's parameter names (walk order) -> this model's parameters."""
    names = {"lm_head.weight": model.lm_head.weight, "wpe.weight": model.transformer.wpe.weight}
    for i, b in enumerate(model.transformer.h):
        names.update(block_names("h.%d" % i, b))
    names["ln_f.weight"] = model.transformer.ln_f.weight
    names["ln_f.bias"] = model.transformer.ln_f.bias
    assert len({id(p) for p in names.values()}) == sum(1 for _ in model.parameters())
    return names


def load_noeira(model, h5file, names=None):
    """Copies every /params/<name>/val of an open h5py File into the model. The file's names
    must be exactly those of `names` (noeira's name -> the model's parameter; by default
    noeira_names(model)), with the same shapes (a ValueError names the first that is not)."""
    names = noeira_names(model) if names is None else names
    stored = set(h5file["params"].keys())
    if stored != set(names):
        raise ValueError("model.h5 holds %s; the torch model %s"
                         % (sorted(stored - set(names)) or "nothing extra",
                            "lacks nothing" if not set(names) - stored
                            else "needs %s" % sorted(set(names) - stored)))
    with torch.no_grad():
        for name, p in names.items():
            value = torch.from_numpy(h5file["params"][name]["val"][()])
            if tuple(value.shape) != tuple(p.shape):
                raise ValueError("%s: model.h5 shape %s, torch %s"
                                 % (name, tuple(value.shape), tuple(p.shape)))
            p.copy_(value.to(p.dtype))
