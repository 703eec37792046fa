#!/usr/bin/python3
"""Recomputes noeira's image leaves in PyTorch and compares every output and input gradient.

usage: pool_torch_check.py FILE [--perturb TENSOR]
  FILE      written by tests/test_pool_torch.cpp: one JSON line (tensor index and cases), then
            raw little-endian float32
  --perturb changes one element of the named noeira tensor before comparing, so that a run can
            show the check fails (tests/pool_torch.cmake registers that run too)

The reference is torch.nn.functional in float64 with autograd: max_pool2d, avg_pool2d (its
defaults: count_include_pad, no ceil_mode), adaptive_avg_pool2d to 1 x 1 and
interpolate(mode='nearest'). Each noeira value must lie within RTOL·|ref| + ATOL·max|ref| of its
reference. Exits 0 when all match, 1 naming every mismatch, 77 (ctest's skip) without torch.
"""
import sys

import torch_cases

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a machine without python3-torch skips, it does not pass
    print("pool_torch_check: no torch (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor: the floor for elements near 0


def reference(case, x):
    """The leaf's output for images x [rows, C, H, W], in the shape noeira writes."""
    kind = case["kind"]
    if kind == "max_pool":
        return F.max_pool2d(x, case["kernel"], case["stride"], case["padding"])
    if kind == "avg_pool":
        return F.avg_pool2d(x, case["kernel"], case["stride"], case["padding"])
    if kind == "global_avg_pool":
        return F.adaptive_avg_pool2d(x, 1).flatten(1)  # GlobalAvgPool2D writes [rows, C]
    if kind == "upsample_nearest":
        return F.interpolate(x, scale_factor=case["scale"], mode="nearest")
    sys.exit("pool_torch_check: unknown kind %s" % kind)


def compare(label, got, ref, failures):
    return torch_cases.compare(label, got, ref, failures, RTOL, ATOL)


def main():
    args = sys.argv[1:]
    perturb = torch_cases.take_perturb(args)
    cases, t = torch_cases.load(args[0])
    if perturb is not None:
        torch_cases.perturb(t, perturb, "pool_torch_check")
    failures = []
    for case in cases:
        name = case["name"]
        given = t[name + "/x"]  # [rows, C, H, W] or [rows, C·H·W], as the leaf read it
        x = torch.tensor(given, dtype=torch.float64).reshape(given.shape[0], *case["image"])
        x.requires_grad_(True)
        y = reference(case, x)
        (y * torch.tensor(t[name + "/dy"], dtype=torch.float64)).sum().backward()
        worst = compare(name + "/y", t[name + "/y"], y, failures)
        worst = max(worst, compare(name + "/dx", t[name + "/dx"], x.grad.reshape(given.shape),
                                   failures))
        print("%-40s largest difference %.3f of the allowed" % (name, worst))
    if not cases:
        sys.exit("pool_torch_check: the file holds no case")
    for f in failures:
        print("pool_torch_check: " + f)
    if failures:
        sys.exit(1)
    print("pool_torch_check: %d tensors of %d cases match torch" % (2 * len(cases), len(cases)))


if __name__ == "__main__":
    main()
