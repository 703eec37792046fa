#!/usr/bin/env python3
"""Checks noeira's BatchNorm against PyTorch.

usage: batchnorm_torch_check.py FILE [--perturb TENSOR]
  FILE      written by tests/test_batchnorm_torch.cpp (tests/torch_case_file.hpp's format)
  --perturb changes one element of the named noeira tensor first: the check must then fail

Each case is two training steps and one evaluation of one layer. torch.nn.functional.batch_norm
recomputes them in float64 from noeira's inputs, weights and running estimates before each step:
the outputs, the input, weight and bias gradients (autograd) and the running estimates after each
step, and the evaluation output.
"""
import sys

import torch_cases

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a machine without python3-torch skips, it does not pass
    print("batchnorm_torch_check: no torch (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor


def f64(a):
    return torch.from_numpy(a).double()


def check_case(case, t, failures):
    name = case["name"]
    checked = 0

    def compare(label, ref):
        nonlocal checked
        torch_cases.compare(label, t[label], ref, failures, RTOL, ATOL)
        checked += 1

    for step in range(case["steps"]):
        at = "%s/step%d" % (name, step)
        x = f64(t[at + "/x"]).requires_grad_(True)
        weight = f64(t[at + "/param/weight"]).requires_grad_(True)
        bias = f64(t[at + "/param/bias"]).requires_grad_(True)
        running_mean = f64(t[at + "/before/buffer/running_mean"])
        running_var = f64(t[at + "/before/buffer/running_var"])
        channels = weight.shape[0]
        xc = x.reshape(x.shape[0], channels, -1)  # [rows, C, pixels]
        y = F.batch_norm(xc, running_mean, running_var, weight, bias, training=True,
                         momentum=0.1, eps=1e-5).reshape(x.shape)
        y.backward(f64(t[at + "/dy"]))
        compare(at + "/y", y)
        compare(at + "/dx", x.grad)
        compare(at + "/grad/weight", weight.grad)
        compare(at + "/grad/bias", bias.grad)
        compare(at + "/after/buffer/running_mean", running_mean)
        compare(at + "/after/buffer/running_var", running_var)
        tracked = float(t[at + "/before/buffer/num_batches_tracked"][0]) + 1
        compare(at + "/after/buffer/num_batches_tracked", torch.tensor([tracked]).double())

    last = "%s/step%d" % (name, case["steps"] - 1)
    x = f64(t[name + "/eval/x"])
    weight = f64(t[last + "/param/weight"])
    y = F.batch_norm(x.reshape(x.shape[0], weight.shape[0], -1),
                     f64(t[last + "/after/buffer/running_mean"]),
                     f64(t[last + "/after/buffer/running_var"]), weight,
                     f64(t[last + "/param/bias"]), training=False, eps=1e-5).reshape(x.shape)
    compare(name + "/eval/y", y)
    return checked


def main():
    args = sys.argv[1:]
    perturb = torch_cases.take_perturb(args)
    cases, t = torch_cases.load(args[0])
    if perturb is not None:
        torch_cases.perturb(t, perturb, "batchnorm_torch_check")
    failures = []
    checked = sum(check_case(case, t, failures) for case in cases)
    if not cases:
        sys.exit("batchnorm_torch_check: the file holds no case")
    for f in failures:
        print("batchnorm_torch_check: " + f)
    if failures:
        sys.exit(1)
    print("batchnorm_torch_check: %d tensors of %d cases match torch" % (checked, len(cases)))


if __name__ == "__main__":
    main()
