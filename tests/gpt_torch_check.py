#!/usr/bin/python3
"""Recomputes one forward and vjp of noeira's GPT in PyTorch and compares the loss, the logits,
the loss's gradient and every parameter gradient.

usage: gpt_torch_check.py DIR [--perturb TENSOR]
  DIR       written by tests/test_gpt_torch.cpp: model.h5 (the weights, read with h5py by their
            walk names) and cases.bin (tests/torch_case_file.hpp's format: ids, targets, loss,
            logits, dlogits, grad/<name>)
  --perturb changes one element of the named noeira tensor before comparing ("grad/h.1.mlp.0.weight",
            "logits", "loss"), so that a run can show the check fails (tests/gpt_torch.cmake
            registers that run too)

The reference is tests/torch_gpt.py's nanoGPT-style model in float64 with autograd, the loss
F.cross_entropy over the [B·T, V] logits (mean over the targets). Each noeira value must lie
within RTOL·|ref| + ATOL·max|ref of the tensor| of its reference. Exits 0 when all match, 1
naming every mismatch (the tensor and its worst element), 77 (ctest's skip) without torch or
h5py.
"""
import os
import sys


import torch_cases

try:
    import h5py
    import torch
    import torch.nn.functional as F

    import torch_gpt
except ImportError as e:  # a machine without python3-torch or h5py skips, it does not pass
    print("gpt_torch_check: no torch or h5py (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor: the floor for elements near 0


def main():
    directory, case, t = torch_cases.load_model_case(sys.argv[1:], "gpt_torch_check", __doc__)
    s = case["shape"]
    model = torch_gpt.GPT(s["vocab"], s["block"], s["layers"], s["heads"], s["width"]).double()
    with h5py.File(os.path.join(directory, "model.h5"), "r") as f:
        torch_cases.check_stored_model(f, case, "gpt_torch_check")
        torch_gpt.load_noeira(model, f)
    b, seq, vocab = case["batch"], case["seq"], s["vocab"]
    ids = torch.tensor(case["ids"], dtype=torch.long).view(b, seq)
    targets = torch.tensor(case["targets"], dtype=torch.long)

    logits = model(ids)
    logits.retain_grad()
    loss = F.cross_entropy(logits.view(b * seq, vocab), targets)
    loss.backward()

    refs = {"loss": loss, "logits": logits, "dlogits": logits.grad}
    names = torch_gpt.noeira_names(model)
    for name, p in names.items():
        refs["grad/" + name] = p.grad
    torch_cases.report("gpt_torch_check", refs, t, RTOL, ATOL,
                       "loss, logits and %d gradients" % len(names))


if __name__ == "__main__":
    main()
