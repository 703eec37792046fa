#!/usr/bin/python3
"""The `noeira train --model cnn` and `--model resnet20` runs in PyTorch, for
benchmarks/compare_pytorch_cnn.sh.

The networks are the noeira presets (src/train/presets.hpp), for 1x28x28 images:

  cnn       Conv2d(1,32,3,p=1,no bias) BN ReLU MaxPool2d(2) Conv2d(32,64,3,p=1,no bias) BN ReLU
            MaxPool2d(2) flatten(64*7*7) Linear(3136,128) ReLU Linear(128,10)
  resnet20  He et al.'s CIFAR ResNet: stem conv3x3(1,16) BN ReLU; 3 stages of 3 BasicBlocks at
            16, 32, 64 channels (strides 1, 2, 2; a 1x1 conv + BN shortcut where the shape
            changes); global average pooling; Linear(64,10)
  mlp       784-256-128-10 (the MLP preset; the benchmark's fallback where the CNN presets are
            missing from the noeira under test)

initialized as noeira initializes its image presets (Kaiming normal, fan in, for every weight;
zero biases; BatchNorm scale 1, shift 0). The data is noeira's: Fashion-MNIST's first
steps x batch training images, (x/255 - 0.2860) / 0.3530 (train/dataset.cpp), in a fresh order.
The optimizer is noeira's default: Adam lr 1e-3 (betas 0.9, 0.999, eps 1e-8) with its
warmup_cosine schedule at no warmup (cosine decay to 0 over the run, per step).

Every step is timed — batch gather, forward, backward, update and the loss read back: what a
noeira step holds. Prints a header line, a line per --log-every steps, then one JSON line with the
figures, last.

Run with /usr/bin/python3 (Debian's python3-torch 1.13: convolutions through oneDNN, matrix
products through OpenBLAS).
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
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(data_dir, name)):
            return os.path.join(data_dir, name)
    sys.exit(f"{os.path.join(data_dir, stem)}[.gz]: file not found")


def load_train(data_dir, limit, mean=0.2860, std=0.3530):
    images = read_idx(find(data_dir, "train-images-idx3-ubyte"), 0x00000803)
    labels = read_idx(find(data_dir, "train-labels-idx1-ubyte"), 0x00000801)
    if limit > len(images):
        sys.exit(f"pytorch_cnn: {limit} samples asked, the training split has {len(images)}")
    x = torch.from_numpy(images[:limit].astype(np.float32) / 255.0).unsqueeze(1)
    return (x - mean) / std, torch.from_numpy(labels[:limit].astype(np.int64))


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = conv3x3(cin, cout, stride), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = conv3x3(cout, cout), nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


def resnet20():
    layers = [conv3x3(1, 16), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for b in range(3):
            layers.append(BasicBlock(cin, cout, stride if b == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


def cnn():
    return nn.Sequential(
        conv3x3(1, 32), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        conv3x3(32, 64), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                         nn.ReLU(), nn.Linear(128, 10))


MODELS = {"cnn": cnn, "resnet20": resnet20, "mlp": mlp}


def init_like_noeira(model):
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def train_flop_per_sample(model):
    """3 x the forward's FLOP (2 per multiply-add) in convolutions and Linear layers, for one
    1x28x28 sample: the backward computes the input and the weight gradients, a product each."""
    macs = []

    def count(module, inputs, output):
        if isinstance(module, nn.Conv2d):
            per_output = module.in_channels // module.groups * math.prod(module.kernel_size)
            macs.append(output.numel() * per_output)
        else:
            macs.append(module.in_features * module.out_features)

    hooks = [m.register_forward_hook(count) for m in model.modules()
             if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model.eval()
        model(torch.zeros(1, 1, 28, 28))
        model.train()
    for h in hooks:
        h.remove()
    return 3 * 2 * sum(macs)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), default="cnn")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--steps", type=int, default=25, help="steps of the run, warm-up included")
    p.add_argument("--time-from", type=int, default=5, help="steps left out of the figures")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-every", type=int, default=0)
    args = p.parse_args()
    if not 0 <= args.time_from < args.steps:
        sys.exit("pytorch_cnn: --time-from must leave at least one measured step")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x_train, y_train = load_train(args.data_dir, args.steps * args.batch)
    model = MODELS[args.model]()
    init_like_noeira(model)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    cosine = lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step, args.steps) / args.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine)
    loss_fn = nn.CrossEntropyLoss()
    order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(args.seed))
    print(f"pytorch {torch.__version__}: model {args.model} ({params} parameters), "
          f"{len(x_train)} train samples, batch {args.batch}, steps {args.steps}, "
          f"threads {torch.get_num_threads()}, oneDNN {torch.backends.mkldnn.is_available()}",
          flush=True)
    step_times, losses = [], []
    for step, idx in enumerate(order.split(args.batch)):
        start = time.perf_counter()
        xb, yb = x_train[idx], y_train[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        step_times.append(time.perf_counter() - start)
        if args.log_every and (step + 1) % args.log_every == 0:
            print(f"pytorch step {step + 1}/{args.steps}  loss {losses[-1]:.4f}  "
                  f"{1e3 * step_times[-1]:.1f} ms", flush=True)
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "model": args.model, "params": params,
                      "batch": args.batch, "steps": args.steps, "time_from": args.time_from,
                      "train_flop_per_sample": train_flop_per_sample(model),
                      "step_times": step_times[args.time_from:], "losses": losses}))


if __name__ == "__main__":
    main()
