"""What the checks against PyTorch share (attention_torch_check.py, gpt_torch_check.py): reading
the case file tests/torch_case_file.hpp writes, the --perturb option that shows a check can fail,
and the comparison of one noeira tensor with its float64 reference.

No torch import here: each check imports torch itself and skips (exit 77) without it.
"""
import json
import sys

import numpy as np


def load(path):
    """The cases (the JSON line's list) and the tensors by name, as float32 numpy arrays."""
    with open(path, "rb") as f:
        header = json.loads(f.readline())
        data = np.frombuffer(f.read(), dtype="<f4")
    tensors = {}
    for t in header["tensors"]:
        n = int(np.prod(t["shape"]))
        tensors[t["name"]] = data[t["offset"]:t["offset"] + n].reshape(t["shape"]).copy()
    return header["cases"], tensors


def take_perturb(args):
    """Removes `--perturb TENSOR` from args; returns TENSOR or None."""
    if "--perturb" not in args:
        return None
    i = args.index("--perturb")
    if i + 1 >= len(args):
        sys.exit("--perturb needs a tensor name")
    name = args[i + 1]
    del args[i:i + 2]
    return name


def perturb(tensors, name, who):
    """Moves element 0 of tensors[name] by 1e-4 relative (at least 1e-4): a check must name it."""
    if name not in tensors:
        sys.exit("%s: no tensor %s to perturb (have: %s)" % (who, name, ", ".join(sorted(tensors))))
    tensors[name].flat[0] += 1e-4 * (1.0 + abs(float(tensors[name].flat[0])))


def compare(label, got, ref, failures, rtol, atol, floor_at_least=1.0):
    """Each element of `got` (noeira, float32) must lie within
    rtol·|ref| + atol·max(floor_at_least, max|ref|) of `ref` (a torch tensor, float64).
    Appends a line naming the tensor, the count and the worst element to `failures`; returns the
    largest error as a fraction of its bound."""
    ref = ref.detach().numpy()
    if got.shape != ref.shape:
        failures.append("%s: shape %s, torch %s" % (label, got.shape, ref.shape))
        return float("inf")
    if not np.all(np.isfinite(got)):
        i = int(np.flatnonzero(~np.isfinite(got))[0])
        failures.append("%s: not finite at [%d] (%s): noeira %r"
                        % (label, i, index_of(i, got.shape), float(got.flat[i])))
        return float("inf")
    scale = max(floor_at_least, float(np.abs(ref).max())) if ref.size else floor_at_least
    bound = rtol * np.abs(ref) + atol * scale
    err = np.abs(got.astype(np.float64) - ref)
    ratio = err / bound if bound.all() else np.where(err > bound, np.inf, 0.0)
    bad = np.flatnonzero(err > bound)
    if bad.size:
        i = int(np.argmax(ratio))
        failures.append("%s: mismatch in %d of %d elements; worst [%d] (%s) noeira %.9g torch %.9g"
                        " (difference %.3g, %.3g relative; allowed %.3g)"
                        % (label, bad.size, err.size, i, index_of(i, got.shape), got.flat[i],
                           ref.flat[i], err.flat[i], err.flat[i] / max(abs(ref.flat[i]), 1e-300),
                           bound.flat[i]))
    return float(ratio.max()) if ratio.size else 0.0


def index_of(flat, shape):
    return ", ".join(str(int(i)) for i in np.unravel_index(flat, shape)) if shape else "scalar"
