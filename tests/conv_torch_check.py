#!/usr/bin/python3
"""Recomputes noeira's Conv2D and ConvTranspose2D in PyTorch and compares every output and
gradient.

usage: conv_torch_check.py FILE [--perturb TENSOR]
  FILE      written by tests/test_conv_torch.cpp: one JSON line (tensor index and cases), then raw
            little-endian float32
  --perturb changes one element of the named noeira tensor before comparing, so that a run can
            show the check fails (tests/conv_torch.cmake registers that run too)

The reference is torch.nn.functional.conv2d / conv_transpose2d in float64 with autograd, on
noeira's own weights and inputs, the loss sum(y · dy). Each noeira value must lie within
RTOL·|ref| + ATOL·max|ref| of its reference. Exits 0 when all match, 1 naming every mismatch, 77
(ctest's skip) without torch.
"""
import sys

import torch_cases

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a machine without python3-torch skips, it does not pass
    print("conv_torch_check: no torch (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor: the floor for elements near 0


def leaf(array):
    return torch.tensor(array, dtype=torch.float64, requires_grad=True)


def run(case, x, weight, bias):
    common = dict(stride=case["stride"], padding=case["padding"], dilation=case["dilation"],
                  groups=case["groups"])
    if case["kind"] == "conv2d":
        return F.conv2d(x, weight, bias, **common)
    return F.conv_transpose2d(x, weight, bias, output_padding=case["output_padding"], **common)


def main():
    args = sys.argv[1:]
    perturb = torch_cases.take_perturb(args)
    cases, t = torch_cases.load(args[0])
    if perturb is not None:
        torch_cases.perturb(t, perturb, "conv_torch_check")
    failures = []
    checked = 0
    for case in cases:
        name = case["name"]
        x = leaf(t[name + "/x"])
        params = {"weight": leaf(t[name + "/param/weight"])}
        if case["bias"]:
            params["bias"] = leaf(t[name + "/param/bias"])
        y = run(case, x, params["weight"], params.get("bias"))
        (y * torch.tensor(t[name + "/dy"], dtype=torch.float64)).sum().backward()
        worst = torch_cases.compare(name + "/y", t[name + "/y"], y, failures, RTOL, ATOL)
        worst = max(worst, torch_cases.compare(name + "/dx", t[name + "/dx"], x.grad, failures,
                                               RTOL, ATOL))
        for param_name, p in params.items():
            label = name + "/grad/" + param_name
            worst = max(worst, torch_cases.compare(label, t[label], p.grad, failures, RTOL, ATOL))
        checked += 2 + len(params)
        print("%-40s largest difference %.3f of the allowed" % (name, worst))
    if not cases or checked == 0:
        sys.exit("conv_torch_check: the file holds no case")
    for f in failures:
        print("conv_torch_check: " + f)
    if failures:
        sys.exit(1)
    print("conv_torch_check: %d tensors of %d cases match torch" % (checked, len(cases)))


if __name__ == "__main__":
    main()
