#!/usr/bin/python3
"""The `noeira train --data text --model gpt-char` run in PyTorch, for
benchmarks/compare_pytorch_gpt.sh.

The model is tests/torch_gpt.py's (nanoGPT's layout, the one tests/gpt_torch_check.py proves
equal to noeira's GPT) at a noeira preset's shape, initialized as noeira initializes it (N(0, 0.02)
matrices and embeddings, zero biases, unit LayerNorm scales); for the lstm-* and gru-* presets
tests/torch_recurrent_lm.py's (nn.LSTM / nn.GRU, the layers tests/recurrent_torch_check.py proves
equal to noeira's). The data is noeira's: the text
corpus read as io/text.cpp reads it (a file, or a directory's regular files in the byte order of
their names, leaving out dot files, *.dat and *.u8), code points as tokens, the first 90% of them
training and the rest validating, the vocabulary the training part's distinct code points in
ascending order from id 1 (0: a character the training text lacks) — train/text_data.cpp and
train/tokenizer.cpp. Windows are drawn as nanoGPT's get_batch draws them (uniform starts from
torch's generator), not the same windows as noeira's. The optimizer is noeira's text defaults:
AdamW (β1 0.9, β2 0.99, eps 1e-8, weight decay 0.1 on the matrices and embeddings only), lr 1e-3
with warmup (min(100, steps / 10) steps) and cosine decay to 1e-4 at the last step exactly as
optim/schedule.cpp, gradients clipped to global norm 1.0.

  pytorch_gpt.py train --model gpt-char --steps 60 --time-from 10 ...   time (and train) a run
  (--checkpoint-activations: every block recomputed in backward, as noeira's flag of that name;
   --bf16: the forward under CPU autocast to bfloat16, as noeira's --precision bf16)
  pytorch_gpt.py evaluate --params RUN/model.h5 ...                      a noeira model's loss

`train` times every step (batch draw, forward, backward, clip, update: what a noeira step
holds), evaluates nanoGPT-style (--eval-batches batches of random validation windows from a
fixed generator) every --eval-every steps and at the end, and with --full-val the mean loss over
the whole validation split in non-overlapping windows. `evaluate` loads a noeira model.h5 into the
same model and prints that full-split loss, so both frameworks' models are scored on the same
tokens by the same code. Each prints lines, then one JSON line with the figures, last.

Run with /usr/bin/python3 (Debian's python3-torch 1.13).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.utils.checkpoint
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import torch_gpt  # noqa: E402  (the model the GPT test checks against noeira)
import torch_recurrent_lm  # noqa: E402

# src/train/presets.hpp: {vocab, block, layers, heads, width}
PRESETS = {
    "gpt-tiny": (256, 16, 2, 2, 32),
    "gpt-char": (256, 64, 4, 4, 128),
    "gpt-small": (256, 256, 6, 6, 384),
    "gpt2-124m": (50257, 1024, 12, 12, 768),
}
# {vocab, window, embedding, hidden}
RECURRENT_PRESETS = {
    "lstm-tiny": ("lstm", 256, 16, 16, 32),
    "lstm-char": ("lstm", 256, 64, 64, 256),
    "gru-char": ("gru", 256, 64, 64, 256),
}
TRAIN_PERCENT = 90  # train/text_data.hpp kTrainPercent


def corpus_files(path):
    if os.path.isfile(path):
        return [path]
    names = []
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if name.startswith(".") or name.endswith(".dat") or name.endswith(".u8"):
            continue
        if os.path.isdir(full):
            continue
        names.append(name)
    return [os.path.join(path, n) for n in sorted(names, key=lambda n: n.encode())]


def load_text(path):
    """(train ids, validation ids, vocabulary size with the unknown id) as noeira splits them."""
    text = b"".join(open(f, "rb").read() for f in corpus_files(path)).decode("utf-8")
    cut = len(text) * TRAIN_PERCENT // 100
    train, validation = text[:cut], text[cut:]
    chars = sorted(set(train))
    ids = {c: i + 1 for i, c in enumerate(chars)}
    encode = lambda s: torch.tensor([ids.get(c, 0) for c in s], dtype=torch.long)
    return encode(train), encode(validation), len(chars) + 1


def get_batch(data, batch, block, generator):
    """nanoGPT's get_batch: `batch` windows at uniform starts, targets one token further on."""
    ix = torch.randint(len(data) - block, (batch,), generator=generator)
    x = torch.stack([data[i:i + block] for i in ix.tolist()])
    y = torch.stack([data[i + 1:i + 1 + block] for i in ix.tolist()])
    return x, y


def lr_at(step, steps, warmup, lr, min_lr):
    """optim/schedule.cpp LrSchedule::lr_at for warmup_cosine."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= steps:
        return min_lr
    p = (step - warmup) / (steps - warmup)
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * p))


@torch.no_grad()
def estimate_loss(model, data, batches, batch, block, seed):
    """nanoGPT's estimate_loss on one split: the mean of `batches` batch losses (a fixed draw)."""
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(batches):
        x, y = get_batch(data, batch, block, gen)
        logits = model(x)
        losses.append(F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)).item())
    model.train()
    return sum(losses) / len(losses)


@torch.no_grad()
def full_split_loss(model, data, block, rows=64):
    """The mean loss per token over the whole split: non-overlapping windows of `block` tokens,
    every token after the first one predicted once."""
    model.eval()
    n = (len(data) - 1) // block
    x_all = data[:n * block].view(n, block)
    y_all = data[1:n * block + 1].view(n, block)
    total = 0.0
    for i in range(0, n, rows):
        logits = model(x_all[i:i + rows])
        total += F.cross_entropy(logits.view(-1, logits.size(-1)), y_all[i:i + rows].reshape(-1),
                                 reduction="sum").item()
    model.train()
    return total / (n * block)


def make_model(name):
    if name in RECURRENT_PRESETS:
        return torch_recurrent_lm.RecurrentLm(*RECURRENT_PRESETS[name])
    vocab, block, layers, heads, width = PRESETS[name]
    return torch_gpt.GPT(vocab, block, layers, heads, width)


def load_noeira(model, h5file):
    if isinstance(model, torch_recurrent_lm.RecurrentLm):
        torch_gpt.load_noeira(model, h5file, torch_recurrent_lm.noeira_names(model))
    else:
        torch_gpt.load_noeira(model, h5file)


class CheckpointedBlock(torch.nn.Module):
    """A block whose forward PyTorch recomputes in backward (torch.utils.checkpoint, the
    non-reentrant variant PyTorch recommends): noeira's --checkpoint-activations."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False)


def checkpoint_blocks(model):
    if isinstance(model, torch_recurrent_lm.RecurrentLm):
        sys.exit("pytorch_gpt: --checkpoint-activations applies to the GPTs")
    blocks = model.transformer.h
    for i in range(len(blocks)):
        blocks[i] = CheckpointedBlock(blocks[i])


def vocab_of(model):
    return model.vocab if isinstance(model, torch_recurrent_lm.RecurrentLm) else \
        model.lm_head.weight.shape[0]


def train(args):
    torch.manual_seed(args.seed)
    train_ids, val_ids, vocab_used = load_text(args.data)
    model = make_model(args.model)
    if vocab_used > vocab_of(model):
        sys.exit("pytorch_gpt: a vocabulary of %d does not fit the model's %d ids"
                 % (vocab_used, vocab_of(model)))
    model.init_like_noeira(torch.Generator().manual_seed(args.seed))
    if args.checkpoint_activations:
        checkpoint_blocks(model)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, args.beta2), eps=1e-8)
    warmup = args.warmup if args.warmup >= 0 else min(100, args.steps // 10)
    block = args.block if args.block > 0 else model.block
    gen = torch.Generator().manual_seed(args.seed)
    print("pytorch %s: model %s (%d parameters), text %d train / %d validation char tokens "
          "(vocabulary %d), batch %d, steps %d, warmup %d, threads %d"
          % (torch.__version__, args.model, params, len(train_ids), len(val_ids), vocab_used,
             args.batch, args.steps, warmup, torch.get_num_threads()), flush=True)
    step_times, evals = [], []
    for step in range(args.steps):
        start = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, warmup, args.lr, args.min_lr)
        x, y = get_batch(train_ids, args.batch, block, gen)
        # --bf16: autocast's bf16 products with fp32 parameters, noeira's --precision bf16.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        loss_value = loss.item()
        step_times.append(time.perf_counter() - start)
        if args.log_every and (step + 1) % args.log_every == 0:
            print("pytorch step %d/%d  loss %.4f  grad norm %.3f  %.1f ms"
                  % (step + 1, args.steps, loss_value, norm.item(), 1e3 * step_times[-1]),
                  flush=True)
        if args.eval_every and ((step + 1) % args.eval_every == 0 or step + 1 == args.steps):
            val = estimate_loss(model, val_ids, args.eval_batches, args.batch, block, args.seed)
            evals.append({"step": step + 1, "val_loss": val})
            print("pytorch eval step %d  val loss %.4f" % (step + 1, val), flush=True)
    record = {"framework": "pytorch", "torch": torch.__version__,
              "threads": torch.get_num_threads(), "model": args.model, "params": params,
              "batch": args.batch, "block": block, "steps": args.steps,
              "time_from": args.time_from, "bf16": args.bf16,
              "step_times": step_times[args.time_from:],
              "train_tokens": len(train_ids), "validation_tokens": len(val_ids),
              "vocabulary": vocab_used, "evals": evals}
    if args.full_val:
        record["full_val_loss"] = full_split_loss(model, val_ids, block)
        print("pytorch full validation split: loss %.4f" % record["full_val_loss"], flush=True)
    print(json.dumps(record))


def evaluate(args):
    import h5py
    _, val_ids, _ = load_text(args.data)
    with h5py.File(args.params, "r") as f:
        stored = f.attrs["model"]
        stored = stored.decode() if isinstance(stored, bytes) else str(stored)
        model = make_model(stored)
        load_noeira(model, f)
    loss = full_split_loss(model, val_ids, model.block)
    print("noeira model %s on the full validation split (scored by torch): loss %.4f"
          % (args.params, loss), flush=True)
    print(json.dumps({"params_file": args.params, "model": stored, "full_val_loss": loss}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--model", choices=sorted(PRESETS) + sorted(RECURRENT_PRESETS), default="gpt-char")
    t.add_argument("--steps", type=int, default=2000)
    t.add_argument("--time-from", type=int, default=0, help="steps before it are warm-up")
    t.add_argument("--batch", type=int, default=12)
    t.add_argument("--block", type=int, default=0,
                   help="tokens per window (0: the model's block; noeira's --block)")
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--min-lr", type=float, default=1e-4)
    t.add_argument("--warmup", type=int, default=-1, help="-1: min(100, steps / 10)")
    t.add_argument("--beta2", type=float, default=0.99)
    t.add_argument("--weight-decay", type=float, default=0.1)
    t.add_argument("--grad-clip", type=float, default=1.0)
    t.add_argument("--eval-every", type=int, default=0, help="0: no evaluation")
    t.add_argument("--eval-batches", type=int, default=20)
    t.add_argument("--full-val", action="store_true")
    t.add_argument("--log-every", type=int, default=0)
    t.add_argument("--checkpoint-activations", action="store_true",
                   help="recompute every block's forward in backward (torch.utils.checkpoint)")
    t.add_argument("--bf16", action="store_true",
                   help="the forward under torch.autocast(cpu, bfloat16): bf16 matrix products, "
                        "fp32 parameters (noeira's --precision bf16)")
    e = sub.add_parser("evaluate")
    e.add_argument("--params", required=True, help="a noeira model.h5")
    for q in (t, e):
        q.add_argument("--data", default="/usr/share/games/fortunes")
        q.add_argument("--threads", type=int, default=2)
        q.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.command == "train":
        if not 0 <= args.time_from < args.steps:
            sys.exit("pytorch_gpt: --time-from must be in [0, --steps)")
        train(args)
    else:
        evaluate(args)


if __name__ == "__main__":
    main()
