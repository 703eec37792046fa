#!/usr/bin/python3
"""Recomputes noeira's LSTM and GRU stacks with torch.nn.LSTM / torch.nn.GRU and compares the
outputs, the input gradients and every parameter gradient.

usage: recurrent_torch_check.py FILE [--perturb TENSOR]
  FILE      written by tests/test_recurrent_torch.cpp: one JSON line (tensor index and cases),
            then raw little-endian float32
  --perturb changes one element of the named noeira tensor before comparing, so that a run can
            show the check fails (tests/recurrent_torch.cmake registers that run too)

Each case is a two-layer stack, noeira's Sequential of two layers, torch's num_layers=2 with
batch_first=True, zero initial state, in float64. noeira's parameter "<k>.<name>" is torch's
"<name>_l<k>". Each noeira value must lie within RTOL·|ref| + ATOL·max|ref| of its reference.
Exits 0 when all match, 1 naming every mismatch, 77 (ctest's skip) without torch.
"""
import sys

import torch_cases

try:
    import torch
except ImportError as e:  # a machine without python3-torch skips, it does not pass
    print("recurrent_torch_check: no torch (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor: the floor for elements near 0
LAYERS = 2
PARAMS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def check_case(case, t, failures):
    name = case["name"]
    cls = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU}[case["cell"]]
    net = cls(case["input"], case["hidden"], num_layers=LAYERS, batch_first=True).double()
    with torch.no_grad():
        for k in range(LAYERS):
            for p in PARAMS:
                getattr(net, "%s_l%d" % (p, k)).copy_(
                    torch.tensor(t["%s/param/%d.%s" % (name, k, p)], dtype=torch.float64))
    x = torch.tensor(t[name + "/x"], dtype=torch.float64, requires_grad=True)
    y, _ = net(x)
    (y * torch.tensor(t[name + "/dy"], dtype=torch.float64)).sum().backward()
    worst = torch_cases.compare(name + "/y", t[name + "/y"], y, failures, RTOL, ATOL)
    worst = max(worst, torch_cases.compare(name + "/dx", t[name + "/dx"], x.grad, failures, RTOL,
                                           ATOL))
    for k in range(LAYERS):
        for p in PARAMS:
            label = "%s/grad/%d.%s" % (name, k, p)
            ref = getattr(net, "%s_l%d" % (p, k)).grad
            worst = max(worst, torch_cases.compare(label, t[label], ref, failures, RTOL, ATOL))
    print("%-14s largest difference %.3f of the allowed" % (name, worst))


def main():
    torch_cases.check_cases(sys.argv[1:], "recurrent_torch_check", __doc__, check_case,
                            "stacks' outputs and gradients")


if __name__ == "__main__":
    main()
