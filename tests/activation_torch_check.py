#!/usr/bin/python3
"""Recomputes noeira's activation leaves in PyTorch and compares every output and input gradient.

usage: activation_torch_check.py FILE [--perturb TENSOR]
  FILE      written by tests/test_activation_torch.cpp: one JSON line (tensor index and cases),
            then raw little-endian float32
  --perturb changes one element of the named noeira tensor before comparing, so that a run can
            show the check fails (tests/activation_torch.cmake registers that run too)

The reference is torch.nn.functional in float64 with autograd (relu, tanh, sigmoid, gelu with
approximate='tanh' and without, silu, elu, hardswish, mish, softplus). Each noeira value must lie within
RTOL·|ref| + ATOL·max|ref| of its reference. Exits 0 when all match, 1 naming every mismatch, 77
(ctest's skip) without torch.
"""
import sys

import torch_cases

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a machine without python3-torch skips, it does not pass
    print("activation_torch_check: no torch (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor: the floor for elements near 0

REFERENCES = {
    "relu": F.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu": F.gelu,
    "silu": F.silu,
    "elu": F.elu,
    "hardswish": F.hardswish,
    "mish": F.mish,
    "softplus": F.softplus,
}


def check_case(case, t, failures):
    name = case["name"]
    if name not in REFERENCES:
        sys.exit("activation_torch_check: no reference for %s" % name)
    x = torch.tensor(t[name + "/x"], dtype=torch.float64, requires_grad=True)
    y = REFERENCES[name](x)
    (y * torch.tensor(t[name + "/dy"], dtype=torch.float64)).sum().backward()
    worst = max(torch_cases.compare(name + "/y", t[name + "/y"], y, failures, RTOL, ATOL),
                torch_cases.compare(name + "/dx", t[name + "/dx"], x.grad, failures, RTOL, ATOL))
    print("%-12s largest difference %.3f of the allowed" % (name, worst))


def main():
    torch_cases.check_cases(sys.argv[1:], "activation_torch_check", __doc__, check_case,
                            "activations' outputs and gradients")


if __name__ == "__main__":
    main()
