#!/usr/bin/python3
"""`mpirun -np N noeira train --policy ddp|zero1` in PyTorch, for benchmarks/compare_pytorch_ddp.sh.

N processes (torch.multiprocessing.spawn, gloo backend on 127.0.0.1), one thread each, the MLP,
data, normalization, Adam and cosine schedule of benchmarks/pytorch_mlp.py (imported from there).
--policy ddp: DistributedDataParallel + Adam. --policy zero: DistributedDataParallel +
torch.distributed.optim.ZeroRedundancyOptimizer(Adam), PyTorch's ZeRO-1 (optimizer state sharded;
gradients are still allreduced by DDP and the updated shards broadcast, there is no ZeRO-2/3 in
torch.distributed for DDP).

Batch sharding as in noeira: one shuffle of the whole set per epoch, the same on every rank
(shared seed), cut into global batches of --batch; rank r takes its contiguous rows of each global
batch. The epoch time is training only, from a barrier before the first step to a barrier after
the last, the slowest rank's; evaluation (rank 0, full test split) is not timed. Rank 0 prints one
line per epoch and, last, one JSON line with the figures.

Run with /usr/bin/python3 (Debian's python3-torch 1.13).
"""
import argparse
import json
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_mlp import evaluate, load, make_model  # noqa: E402  (needs the path above)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(rank, args):
    torch.set_num_threads(args.threads)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    torch.manual_seed(args.seed)
    x_train, y_train = load(args.data_dir, "train")
    x_test, y_test = load(args.data_dir, "t10k")
    # DDP broadcasts rank 0's parameters at construction, so replicas start identical.
    model = DistributedDataParallel(make_model())
    if args.compress == "fp16":
        # Gradients sent as fp16 (gloo has no bf16 sums: "Invalid scalar type"): PyTorch's
        # nearest peer of noeira's --reduce-dtype bf16 on the CPU.
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    if args.policy == "zero":
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                      lr=args.lr)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    n = len(x_train)
    steps_per_epoch = math.ceil(n / args.batch)
    total_steps = args.epochs * steps_per_epoch
    if args.schedule == "cosine":  # noeira's warmup_cosine with no warmup and min_lr 0
        decay = lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step, total_steps) / total_steps))
    else:
        decay = lambda step: 1.0
    sched = torch.optim.lr_scheduler.LambdaLR(opt, decay)
    gen = torch.Generator().manual_seed(args.seed)  # same on every rank: one global order

    epoch_times, record = [], {}
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(n, generator=gen)
        dist.barrier()
        start = time.perf_counter()
        loss_sum = torch.zeros(1)
        for idx in order.split(args.batch):
            # Rows split as evenly as possible, so a short last batch still works.
            lo = rank * len(idx) // args.world
            hi = (rank + 1) * len(idx) // args.world
            mine = idx[lo:hi]
            xb, yb = x_train[mine], y_train[mine]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.detach() * len(mine)
        dist.barrier()
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        dist.all_reduce(loss_sum)
        elapsed = elapsed.item()
        epoch_times.append(elapsed)
        if rank == 0:
            test_loss, test_acc = evaluate(model.module, x_test, y_test)
            print(f"pytorch {args.policy} epoch {epoch}/{args.epochs}  "
                  f"train loss {loss_sum.item() / n:.4f}  test loss {test_loss:.4f}  "
                  f"test acc {100 * test_acc:.2f}%  {n / elapsed:.0f} samples/s  "
                  f"epoch {elapsed:.2f}s", flush=True)
            record = {"test_accuracy": test_acc, "test_loss": test_loss}
        dist.barrier()
    if rank == 0:
        print(json.dumps({"framework": "pytorch", "torch": torch.__version__,
                          "policy": args.policy, "world": args.world, "backend": "gloo",
                          "compress": args.compress,
                          "threads": torch.get_num_threads(), "schedule": args.schedule,
                          "epoch_times": epoch_times, **record}), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policy", choices=["ddp", "zero"], default="ddp")
    p.add_argument("--world", type=int, default=2, help="processes")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=100, help="global batch (all ranks together)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=1, help="threads per process")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--schedule", choices=["cosine", "constant"], default="cosine")
    p.add_argument("--port", type=int, default=0, help="rendezvous port (0: a free one)")
    p.add_argument("--compress", choices=["none", "fp16"], default="none",
                   help="DDP gradients on the wire: as they are, or fp16 (fp16_compress_hook)")
    args = p.parse_args()
    if args.port == 0:
        args.port = free_port()
    mp.spawn(run, args=(args,), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
