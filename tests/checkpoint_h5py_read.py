#!/usr/bin/python3
"""Rebuilds one logical tensor of a noeira checkpoint with h5py and numpy alone (no noeira code),
following docs/checkpoint-format.md. Used by tests/test_checkpoint.cpp.

usage: checkpoint_h5py_read.py CKPT OUTDIR TENSOR...
  CKPT    a checkpoint directory (its `latest` file is followed) or a step directory
  OUTDIR  gets <i>.bin for the i-th TENSOR: raw little-endian float32 bytes, row-major
  TENSOR  e.g. params/0.weight/val
Prints "step S world_size N policy P samples_seen K"; exits non-zero on any inconsistency.
"""
import glob
import os
import sys
import zlib

import h5py
import numpy as np


def step_directory(path):
    latest = os.path.join(path, "latest")
    if os.path.isfile(latest):
        with open(latest) as f:
            return os.path.join(path, f.read().strip())
    return path


def rebuild(step_dir, files, name):
    full, covered = None, None
    for path in files:
        with h5py.File(path, "r") as f:
            if name not in f:
                continue  # this rank holds no part of the tensor
            ds = f[name]
            data = ds[...]
            if zlib.crc32(data.astype("<f4").tobytes()) != int(ds.attrs["crc32"]):
                sys.exit("%s: checksum mismatch in %s" % (path, name))
            shape = tuple(int(d) for d in ds.attrs["global_shape"])
            offset = int(ds.attrs["offset"])
            if full is None:
                full = np.empty(int(np.prod(shape)), dtype="<f4")
                covered = np.zeros(full.size, dtype=bool)
            full[offset:offset + data.size] = data
            covered[offset:offset + data.size] = True
    if full is None or not covered.all():
        sys.exit("%s: tensor %s is not fully covered by the rank files" % (step_dir, name))
    return full.reshape(shape)


def main():
    ckpt, outdir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    step_dir = step_directory(ckpt)
    files = sorted(glob.glob(os.path.join(step_dir, "rank-*.h5")))
    with h5py.File(files[0], "r") as f:
        world_size = int(f.attrs["world_size"])
        meta = "step %d world_size %d policy %s samples_seen %d" % (
            f.attrs["step"], world_size, f.attrs["policy"].decode(), f.attrs["samples_seen"])
    if len(files) != world_size:
        sys.exit("expected %d rank files, found %d" % (world_size, len(files)))
    for i, name in enumerate(names):
        with open(os.path.join(outdir, "%d.bin" % i), "wb") as f:
            f.write(rebuild(step_dir, files, name).tobytes())
    print(meta)


if __name__ == "__main__":
    main()
