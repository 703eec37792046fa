#!/usr/bin/env python3
"""Recomputes one training step of noeira's resnet20 in PyTorch: the logits, the loss, every
parameter gradient and the BatchNorm running estimates after the step.

usage: resnet_torch_check.py FILE [--perturb TENSOR]
  FILE      written by tests/test_resnet_torch.cpp (tests/torch_case_file.hpp's format): the
            input, every parameter ("param/<name>") and buffer before the step
            ("before/<name>"), noeira's logits, loss, gradients ("grad/<name>") and buffers after
  --perturb changes one element of a noeira tensor first: the check must then fail

The reference is tests/torch_resnet.py's network in float64, loaded by noeira's walk names, which
are torchvision's state_dict keys (a name torch lacks, or one noeira lacks, is a failure), in
training mode, with F.cross_entropy's mean over the batch.
"""
import sys

import torch_cases

try:
    import torch
    import torch.nn.functional as F

    import torch_resnet
except ImportError as e:  # a machine without python3-torch skips, it does not pass
    print("resnet_torch_check: no torch (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor


def main():
    args = sys.argv[1:]
    perturb = torch_cases.take_perturb(args)
    cases, t = torch_cases.load(args[0])
    if perturb is not None:
        torch_cases.perturb(t, perturb, "resnet_torch_check")
    case = cases[0]
    model = torch_resnet.cifar_resnet(case["channels"], case["blocks"], case["classes"]).double()
    state = model.state_dict()
    failures = []
    noeira_names = set()
    for key in t:
        for prefix in ("param/", "before/"):
            if key.startswith(prefix):
                noeira_names.add(key[len(prefix):])
    missing = sorted(set(state) - noeira_names)
    extra = sorted(noeira_names - set(state))
    if missing or extra:
        failures.append("names differ from torchvision's: torch only %s; noeira only %s"
                        % (missing, extra))
    with torch.no_grad():
        for name, value in state.items():
            key = ("param/" if name in dict(model.named_parameters()) else "before/") + name
            if key in t:
                value.copy_(torch.from_numpy(t[key]).reshape(value.shape).to(value.dtype))
    model.train()
    x = torch.from_numpy(t["x"]).double().reshape(-1, case["channels"], case["size"], case["size"])
    labels = torch.tensor(case["labels"], dtype=torch.long)
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    checked = 0
    refs = {"logits": logits, "loss": loss.reshape(1)}
    for name, p in model.named_parameters():
        refs["grad/" + name] = p.grad
    for name, b in model.named_buffers():
        refs["after/" + name] = b.double()
    for name, ref in refs.items():
        if name not in t:
            failures.append("noeira wrote no %s" % name)
            continue
        torch_cases.compare(name, t[name].reshape(ref.shape), ref, failures, RTOL, ATOL)
        checked += 1
    for f in failures:
        print("resnet_torch_check: " + f)
    if failures:
        sys.exit(1)
    print("resnet_torch_check: %d tensors of a resnet%d step match torch"
          % (checked, 6 * case["blocks"] + 2))


if __name__ == "__main__":
    main()
