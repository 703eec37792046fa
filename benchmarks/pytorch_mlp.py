#!/usr/bin/python3
"""The `noeira train --model mlp` run in PyTorch, for benchmarks/compare_pytorch.sh.

Same network (784-256-128-10, ReLU, Kaiming-normal weights, zero biases), same data and
normalization ((x/255 - 0.2860) / 0.3530), Adam lr 1e-3 with noeira's default schedule (cosine
decay to 0 over the run, per step; --schedule constant for a fixed rate), batch 100, a fresh
shuffle every epoch, evaluation on the test split after every epoch (not timed). Prints one line per epoch and, last,
one JSON line with the figures.

Batches are cut from in-memory tensors by a shuffled index (--loader tensor, the fastest way to
feed this model in PyTorch), or come from a torch.utils.data.DataLoader over a TensorDataset
(--loader dataloader, what most training scripts do).

Run with /usr/bin/python3 (Debian's python3-torch 1.13).
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
from torch import nn


def read_idx(path, magic):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    (got,) = struct.unpack(">I", data[:4])
    if got != magic:
        sys.exit(f"{path}: magic {got:#010x}, expected {magic:#010x}")
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(data_dir, name)):
            return os.path.join(data_dir, name)
    sys.exit(f"{os.path.join(data_dir, stem)}[.gz]: file not found")


def load(data_dir, prefix, mean=0.2860, std=0.3530):
    images = read_idx(find(data_dir, f"{prefix}-images-idx3-ubyte"), 0x00000803)
    labels = read_idx(find(data_dir, f"{prefix}-labels-idx1-ubyte"), 0x00000801)
    x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / 255.0)
    x = (x - mean) / std
    return x, torch.from_numpy(labels.astype(np.int64))


def make_model():
    model = nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)
    )
    for m in model:
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    return model


@torch.no_grad()
def evaluate(model, x, y, batch=1000):
    model.eval()
    loss_sum, correct = 0.0, 0
    for i in range(0, len(x), batch):
        logits = model(x[i : i + batch])
        loss_sum += nn.functional.cross_entropy(logits, y[i : i + batch], reduction="sum").item()
        correct += (logits.argmax(1) == y[i : i + batch]).sum().item()
    model.train()
    return loss_sum / len(x), correct / len(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--loader", choices=["tensor", "dataloader"], default="tensor")
    p.add_argument("--schedule", choices=["cosine", "constant"], default="cosine")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x_train, y_train = load(args.data_dir, "train")
    x_test, y_test = load(args.data_dir, "t10k")
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    total_steps = args.epochs * math.ceil(len(x_train) / args.batch)
    if args.schedule == "cosine":  # noeira's warmup_cosine with no warmup and min_lr 0
        decay = lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step, total_steps) / total_steps))
    else:
        decay = lambda step: 1.0
    sched = torch.optim.lr_scheduler.LambdaLR(opt, decay)
    gen = torch.Generator().manual_seed(args.seed)
    loader = None
    if args.loader == "dataloader":
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(x_train, y_train),
            batch_size=args.batch, shuffle=True, generator=gen)

    epoch_times, record = [], {}
    n = len(x_train)
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        loss_sum = 0.0
        if loader is not None:
            batches = iter(loader)
        else:
            order = torch.randperm(n, generator=gen)
            batches = ((x_train[idx], y_train[idx]) for idx in order.split(args.batch))
        for xb, yb in batches:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(xb)
        elapsed = time.perf_counter() - start
        epoch_times.append(elapsed)
        test_loss, test_acc = evaluate(model, x_test, y_test)
        print(f"pytorch epoch {epoch}/{args.epochs}  train loss {loss_sum / n:.4f}  "
              f"test loss {test_loss:.4f}  test acc {100 * test_acc:.2f}%  "
              f"{n / elapsed:.0f} samples/s  epoch {elapsed:.2f}s", flush=True)
        record = {"test_accuracy": test_acc, "test_loss": test_loss}
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "loader": args.loader, "schedule": args.schedule,
                      "epoch_times": epoch_times, **record}))


if __name__ == "__main__":
    main()
