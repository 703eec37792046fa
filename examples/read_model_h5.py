#!/usr/bin/python3
"""Classifies Fashion-MNIST (or MNIST) test images with a noeira MLP's model.h5, using h5py and
numpy alone: what the file says of itself (docs/checkpoint-format.md, "Self-describing
attributes") is all it needs to prepare the inputs as the model was trained on them.

usage: read_model_h5.py MODEL_H5 [DATA_DIR] [--limit N] [--raw]
  MODEL_H5  a model.h5 of `noeira train --model mlp` or `--model linear`
  DATA_DIR  the IDX files (default /usr/share/datasets/<data attribute>)
  --limit N the first N test images only
  --raw     feed pixel / 255 without the stored normalization (to see what it is worth)
Prints "accuracy A on N samples (labels: ...)".
"""
import argparse
import gzip
import json
import os
import sys

import h5py
import numpy as np


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(data_dir, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(data_dir, name)):
            return os.path.join(data_dir, name)
    sys.exit("%s: no %s[.gz]" % (data_dir, stem))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_h5")
    ap.add_argument("data_dir", nargs="?")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--raw", action="store_true")
    args = ap.parse_args()

    with h5py.File(args.model_h5, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        if attrs.get("format") != "noeira-params":
            sys.exit("%s: not a noeira model.h5" % args.model_h5)
        if attrs["model"] not in ("mlp", "linear"):
            sys.exit("%s: model %s; this example runs the MLP presets" %
                     (args.model_h5, attrs["model"]))
        params = f["params"]
        layers = sorted(int(name.split(".")[0]) for name in params if name.endswith(".weight"))
        weights = [(params["%d.weight/val" % i][...], params["%d.bias/val" % i][...])
                   for i in layers]

    data_dir = args.data_dir or os.path.join("/usr/share/datasets", attrs["data"])
    images = read_idx(find(data_dir, "t10k-images-idx3-ubyte"))
    labels = read_idx(find(data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64)
    if args.limit:
        images, labels = images[:args.limit], labels[:args.limit]

    shape = json.loads(attrs["input_shape"])
    mean = np.array(json.loads(attrs["input_mean"]), np.float32).reshape(-1, 1, 1)
    std = np.array(json.loads(attrs["input_std"]), np.float32).reshape(-1, 1, 1)
    x = images.reshape([len(images)] + shape).astype(np.float32) / 255.0
    if not args.raw:
        x = (x - mean) / std
    x = x.reshape(len(images), -1)

    # Linear layers with ReLU between them (the presets' fused Linear+ReLU), logits last.
    for i, (w, b) in enumerate(weights):
        x = x @ w.T + b
        if i + 1 < len(weights):
            x = np.maximum(x, 0.0)
    accuracy = float(np.mean(np.argmax(x, axis=1) == labels))
    names = json.loads(attrs["labels"])
    print("accuracy %.4f on %d samples (labels: %s)" % (accuracy, len(labels), ", ".join(names)))


if __name__ == "__main__":
    main()
