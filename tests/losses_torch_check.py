#!/usr/bin/python3
"""Recomputes noeira's two-hot, Gaussian NLL and sequence cross-entropy losses in PyTorch and
compares each mean loss and gradient.

usage: losses_torch_check.py FILE [--perturb TENSOR]
  FILE      written by tests/test_losses_torch.cpp: one JSON line (tensor index and cases),
            then raw little-endian float32
  --perturb changes one element of the named noeira tensor before comparing, so that a run can
            show the check fails (tests/losses_torch.cmake registers that run too)

The references, in float64 with autograd:
  two_hot       -(t · log_softmax(logits)).sum(-1).mean(), the target t built in torch as the
                triangle weights max(0, 1 - |clamp(y) - bin| / spacing) of the bins
                linspace(low, high, bins): an encoding written differently from noeira's
  gaussian_nll  torch.nn.GaussianNLLLoss(eps)(mean, target, var), gradients to mean and var
  sequence      F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index)
Each noeira value must lie within RTOL·|ref| + ATOL·max(1, max|ref|) of its reference. Exits 0
when all match, 1 naming every mismatch, 77 (ctest's skip) without torch.
"""
import sys

import numpy as np

import torch_cases

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a machine without python3-torch skips, it does not pass
    print("losses_torch_check: no torch (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor (at least 1): the floor near 0


def f64(a, grad=False):
    return torch.tensor(a, dtype=torch.float64, requires_grad=grad)


def two_hot(case, t):
    logits = f64(t["two_hot/logits"], grad=True)
    y = f64(t["two_hot/target"])
    low, high = float(case["low"]), float(case["high"])
    bins = logits.shape[1]
    centres = torch.linspace(low, high, bins, dtype=torch.float64)
    spacing = (high - low) / (bins - 1)
    target = (1.0 - (y.clamp(low, high)[:, None] - centres[None, :]).abs() / spacing).clamp(min=0)
    loss = -(target * F.log_softmax(logits, dim=-1)).sum(-1).mean()
    loss.backward()
    return loss, {"two_hot/grad": logits.grad}


def gaussian_nll(case, t):
    pred = t["gaussian_nll/pred"]
    d = pred.shape[1] // 2
    mean = f64(pred[:, :d], grad=True)
    var = f64(pred[:, d:], grad=True)
    loss = torch.nn.GaussianNLLLoss(eps=float(case["eps"]))(mean, f64(t["gaussian_nll/target"]),
                                                             var)
    loss.backward()
    return loss, {"gaussian_nll/grad": torch.cat([mean.grad, var.grad], dim=1)}


def sequence(case, t):
    logits = f64(t["sequence/logits"], grad=True)
    labels = torch.tensor(t["sequence/labels"].astype(np.int64))
    vocab = logits.shape[-1]
    loss = F.cross_entropy(logits.view(-1, vocab), labels.view(-1),
                           ignore_index=int(case["ignore_index"]))
    loss.backward()
    return loss, {"sequence/grad": logits.grad}


REFERENCES = {"two_hot": two_hot, "gaussian_nll": gaussian_nll, "sequence": sequence}


def check_case(case, t, failures):
    name = case["name"]
    if name not in REFERENCES:
        sys.exit("losses_torch_check: no reference for %s" % name)
    loss, grads = REFERENCES[name](case, t)
    worst = torch_cases.compare(name + "/loss", np.array(case["loss"], dtype=np.float64), loss,
                                failures, RTOL, ATOL)
    for gname, ref in grads.items():
        worst = max(worst, torch_cases.compare(gname, t[gname], ref, failures, RTOL, ATOL))
    print("%-13s loss noeira %.9f torch %.9f; largest difference %.3f of the allowed"
          % (name, case["loss"], loss.item(), worst))


def main():
    torch_cases.check_cases(sys.argv[1:], "losses_torch_check", __doc__, check_case,
                            "losses and their gradients")


if __name__ == "__main__":
    main()
