"""What the checks against PyTorch share (attention_torch_check.py, gpt_torch_check.py,
vit_torch_check.py, ...): reading the case file tests/torch_case_file.hpp writes, the --perturb
option that shows a check can fail, the comparison of one noeira tensor with its float64
reference, and for a whole model's step the single case, its model.h5 and the report.

No torch import here: each check imports torch itself and skips (exit 77) without it.
"""
import json
import os
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


def perturb(tensors, name, who, amount=1e-4):
    """Moves element 0 of tensors[name] by `amount` relative (at least `amount`): a check must
    name it."""
    if name not in tensors:
        sys.exit("%s: no tensor %s to perturb (have: %s)" % (who, name, ", ".join(sorted(tensors))))
    tensors[name].flat[0] += amount * (1.0 + abs(float(tensors[name].flat[0])))


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


def load_model_case(argv, who, usage):
    """A whole model's check: argv is [DIR] [--perturb TENSOR]. Returns (DIR, the one case, its
    tensors with "loss" among them, perturbed as asked: by 1e-4, or by 5e-2 in a case of bf16
    products, whose tolerance is wider)."""
    args = list(argv)
    name = take_perturb(args)
    if len(args) != 1:
        sys.exit(usage)
    cases, tensors = load(os.path.join(args[0], "cases.bin"))
    if len(cases) != 1:
        sys.exit("%s: expected one case, the file holds %d" % (who, len(cases)))
    tensors["loss"] = np.array(cases[0]["loss"], dtype=np.float64)
    if name is not None:
        bf16 = cases[0].get("precision", "fp32") == "bf16"
        perturb(tensors, name, who, 5e-2 if bf16 else 1e-4)
    return args[0], cases[0], tensors


def check_stored_model(h5file, case, who):
    """model.h5 must be the preset the case names."""
    stored = h5file.attrs["model"]
    stored = stored.decode() if isinstance(stored, bytes) else str(stored)
    if stored != case["model"]:
        sys.exit("%s: model.h5 is a %s, the case a %s" % (who, stored, case["model"]))


def report(who, refs, tensors, rtol, atol, what):
    """Compares every reference (name -> float64 torch tensor) with noeira's tensor of that name,
    prints the five closest calls and the losses, and exits 1 naming every mismatch (a reference
    noeira did not write is one), or prints `what` matched."""
    failures = []
    worst = {}
    missing = sorted(set(refs) - set(tensors))
    if missing:
        failures.append("noeira wrote no %s" % ", ".join(missing))
    for name, ref in refs.items():
        if name in tensors:
            worst[name] = compare(name, tensors[name], ref, failures, rtol, atol,
                                  floor_at_least=0.0)
    width = max(len(n) for n in refs)
    for name in sorted(worst, key=worst.get, reverse=True)[:5]:
        print("%-*s largest difference %.3f of the allowed" % (width, name, worst[name]))
    print("loss: noeira %.9f, torch %.9f" % (float(tensors["loss"]), refs["loss"].item()))
    for f in failures:
        print("%s: %s" % (who, f))
    if failures:
        sys.exit(1)
    print("%s: %s match torch" % (who, what))


def check_cases(argv, who, usage, check_case, what):
    """A check over a file of several cases: argv is [FILE] [--perturb TENSOR]. Calls
    check_case(case, tensors, failures) for each case (it compares and prints its own line), then
    exits 1 naming every mismatch, or prints that `what` match torch."""
    args = list(argv)
    name = take_perturb(args)
    if len(args) != 1:
        sys.exit(usage)
    cases, tensors = load(args[0])
    if name is not None:
        perturb(tensors, name, who)
    if not cases:
        sys.exit("%s: the file holds no case" % who)
    failures = []
    for case in cases:
        check_case(case, tensors, failures)
    for f in failures:
        print("%s: %s" % (who, f))
    if failures:
        sys.exit(1)
    print("%s: %d %s match torch" % (who, len(cases), what))
