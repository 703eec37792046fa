"""noeira's ViT (src/nn/vit.hpp) written in PyTorch as timm's VisionTransformer computes it
(class token, no dropout, no distillation token): the patch embedding a Conv2d of kernel and
stride P followed by flatten(2).transpose(1, 2), the class token prepended, the learned position
embedding added, pre-LayerNorm blocks whose attention every token sees whole (tests/torch_gpt.py's
Block with causal=False: fused qkv, tanh GELU), the final LayerNorm over every token, token 0,
a Linear head.

noeira_names() maps noeira's parameter walk (the names in model.h5) to this model's parameters,
for torch_gpt.load_noeira.
"""
import torch
from torch import nn

import torch_gpt


class ViT(nn.Module):
    def __init__(self, channels, height, width, patch, layers, heads, dim, classes):
        super().__init__()
        tokens = (height // patch) * (width // patch) + 1
        self.patch_embed = nn.Conv2d(channels, dim, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens, dim))
        self.blocks = nn.ModuleList(
            [torch_gpt.Block(dim, heads, tokens, causal=False) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim, eps=1e-5)
        self.head = nn.Linear(dim, classes)

    def forward(self, images):
        """images [B, C, H, W] -> logits [B, classes]."""
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


def noeira_names(model):
    """noeira's parameter names (walk order) -> this model's parameters."""
    names = {"patch_embed.proj.weight": model.patch_embed.weight,
             "patch_embed.proj.bias": model.patch_embed.bias,
             "cls_token": model.cls_token, "pos_embed": model.pos_embed}
    for i, b in enumerate(model.blocks):
        names.update(torch_gpt.block_names("blocks.%d" % i, b))
    names.update({"norm.weight": model.norm.weight, "norm.bias": model.norm.bias,
                  "head.weight": model.head.weight, "head.bias": model.head.bias})
    assert len({id(p) for p in names.values()}) == sum(1 for _ in model.parameters())
    return names
