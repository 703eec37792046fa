#!/usr/bin/python3
"""Recomputes one forward and vjp of a noeira ViT in PyTorch and compares the loss, the logits,
the loss's gradient, the images' gradient and every parameter gradient.

usage: vit_torch_check.py DIR [--perturb TENSOR]
  DIR       written by tests/test_vit_torch.cpp: model.h5 (the weights, read with h5py by their
            walk names) and cases.bin (tests/torch_case_file.hpp's format: labels, loss, images,
            logits, dlogits, dimages, grad/<name>)
  --perturb changes one element of the named noeira tensor before comparing
            ("grad/patch_embed.proj.weight", "logits", "loss"), so that a run can show the check
            fails (tests/vit_torch.cmake registers that run too)

The reference is tests/torch_vit.py's timm-style model in float64 with autograd, the loss
F.cross_entropy over the [B, classes] logits (mean over the rows). Each noeira value must lie
within RTOL·|ref| + ATOL·max|ref of the tensor| of its reference. Exits 0 when all match, 1
naming every mismatch (the tensor and its worst element), 77 (ctest's skip) without torch or
h5py.
"""
import os
import sys

import numpy as np

import torch_cases

try:
    import h5py
    import torch
    import torch.nn.functional as F

    import torch_gpt
    import torch_vit
except ImportError as e:  # a machine without python3-torch or h5py skips, it does not pass
    print("vit_torch_check: no torch or h5py (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor: the floor for elements near 0


def main():
    args = sys.argv[1:]
    perturb = torch_cases.take_perturb(args)
    if len(args) != 1:
        sys.exit(__doc__)
    directory = args[0]
    cases, t = torch_cases.load(os.path.join(directory, "cases.bin"))
    if len(cases) != 1:
        sys.exit("vit_torch_check: expected one case, the file holds %d" % len(cases))
    case = cases[0]
    t["loss"] = np.array(case["loss"], dtype=np.float64)
    if perturb is not None:
        torch_cases.perturb(t, perturb, "vit_torch_check")

    s = case["shape"]
    model = torch_vit.ViT(s["channels"], s["height"], s["width"], s["patch"], s["layers"],
                          s["heads"], s["dim"], s["classes"]).double()
    names = torch_vit.noeira_names(model)
    with h5py.File(os.path.join(directory, "model.h5"), "r") as f:
        stored = f.attrs["model"]
        stored = stored.decode() if isinstance(stored, bytes) else str(stored)
        if stored != case["model"]:
            sys.exit("vit_torch_check: model.h5 is a %s, the case a %s" % (stored, case["model"]))
        torch_gpt.load_noeira(model, f, names)
    images = torch.from_numpy(t["images"]).double().requires_grad_(True)
    labels = torch.tensor(case["labels"], dtype=torch.long)

    logits = model(images)
    logits.retain_grad()
    loss = F.cross_entropy(logits, labels)
    loss.backward()

    failures = []
    worst = {}
    refs = {"loss": loss, "logits": logits, "dlogits": logits.grad, "dimages": images.grad}
    for name, p in names.items():
        refs["grad/" + name] = p.grad
    missing = sorted(set(refs) - set(t))
    if missing:
        failures.append("noeira wrote no %s" % ", ".join(missing))
    for name, ref in refs.items():
        if name in t:
            worst[name] = torch_cases.compare(name, t[name], ref, failures, RTOL, ATOL,
                                              floor_at_least=0.0)
    for name in sorted(worst, key=worst.get, reverse=True)[:5]:
        print("%-32s largest difference %.3f of the allowed" % (name, worst[name]))
    print("loss: noeira %.9f, torch %.9f" % (float(t["loss"]), loss.item()))
    for f in failures:
        print("vit_torch_check: " + f)
    if failures:
        sys.exit(1)
    print("vit_torch_check: loss, logits, the images' and %d parameter gradients match torch"
          % len(names))


if __name__ == "__main__":
    main()
