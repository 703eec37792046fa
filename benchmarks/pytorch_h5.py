#!/usr/bin/python3
"""PyTorch reading a user's HDF5 file the usual way, for benchmarks/compare_pytorch_h5.sh.

A torch.utils.data.Dataset over h5py (the file opened once per process, a sample read per
__getitem__), a DataLoader with shuffling and the default collation, and the MLP of
`noeira train --model mlp` (784-256-128-10, ReLU) with Adam at lr 1e-3, batch 100, for one
epoch. Prints one JSON line: the seconds from start to the end of the first step, the steady
samples/s after it, the mean seconds per step spent waiting for the batch, and the peak resident
memory. Run with /usr/bin/python3 (Debian's python3-torch 1.13, python3-h5py).
"""
import argparse
import json
import resource
import time

START = time.perf_counter()

import h5py  # noqa: E402  (timed: the import is part of a run's start)
import torch  # noqa: E402
from torch import nn  # noqa: E402


class H5Rows(torch.utils.data.Dataset):
    def __init__(self, path):
        self.path, self.file = path, None
        with h5py.File(path, "r") as f:
            self.count = len(f["y"])

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if self.file is None:  # once per process: DataLoader workers each open their own
            self.file = h5py.File(self.path, "r")
            self.x, self.y = self.file["x"], self.file["y"]
        return torch.from_numpy(self.x[i]), int(self.y[i])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--file", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--workers", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    loader = torch.utils.data.DataLoader(H5Rows(a.file), batch_size=100, shuffle=True,
                                         num_workers=a.workers, drop_last=True)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    first_step = None
    waited, steps, samples = 0.0, 0, 0
    batches = iter(loader)
    while True:
        t = time.perf_counter()
        try:
            x, y = next(batches)
        except StopIteration:
            break
        if first_step is not None:
            waited += time.perf_counter() - t
        opt.zero_grad()
        loss = loss_fn(model(x.reshape(len(x), -1)), y)
        loss.backward()
        opt.step()
        if first_step is None:
            first_step = time.perf_counter() - START
            steady_start = time.perf_counter()
        else:
            steps += 1
            samples += len(x)
    steady = time.perf_counter() - steady_start
    print(json.dumps({"first_step_s": first_step, "samples_per_s": samples / steady,
                      "data_s_per_step": waited / max(steps, 1), "final_loss": loss.item(),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
