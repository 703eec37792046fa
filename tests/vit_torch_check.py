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
    directory, case, t = torch_cases.load_model_case(sys.argv[1:], "vit_torch_check", __doc__)
    s = case["shape"]
    model = torch_vit.ViT(s["channels"], s["height"], s["width"], s["patch"], s["layers"],
                          s["heads"], s["dim"], s["classes"]).double()
    names = torch_vit.noeira_names(model)
    with h5py.File(os.path.join(directory, "model.h5"), "r") as f:
        torch_cases.check_stored_model(f, case, "vit_torch_check")
        torch_gpt.load_noeira(model, f, names)
    images = torch.from_numpy(t["images"]).double().requires_grad_(True)
    labels = torch.tensor(case["labels"], dtype=torch.long)

    logits = model(images)
    logits.retain_grad()
    loss = F.cross_entropy(logits, labels)
    loss.backward()

    refs = {"loss": loss, "logits": logits, "dlogits": logits.grad, "dimages": images.grad}
    for name, p in names.items():
        refs["grad/" + name] = p.grad
    torch_cases.report("vit_torch_check", refs, t, RTOL, ATOL,
                       "loss, logits, the images' and %d parameter gradients" % len(names))


if __name__ == "__main__":
    main()
