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
within RTOL·|ref| + ATOL·max|ref of the tensor| of its reference.

A case of mixed precision (its "precision", --precision bf16) is recomputed as the trainer runs
it: the model's weights are the fp32 masters, which the units use as a bf16 copy, so the
reference first rounds every parameter to bfloat16 (when its "parameters" says so), then runs
with the operands of every matrix product — each Linear, q·kᵀ, p·v, the LM head, forward and
backward — rounded to bfloat16 by PyTorch's own conversion (bf16_products below), the sums still
in float64. The gradients are those of the rounded parameters. Its
tolerance is wider: where noeira's fp32 sums and the float64 ones round a value to neighbouring
bfloat16s, the difference travels on. The check also shows that the rounding happened: the same
reference without it must disagree with noeira beyond that tolerance. Exits 0 when all match, 1
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
    from torch.overrides import TorchFunctionMode

    import torch_gpt
except ImportError as e:  # a machine without python3-torch or h5py skips, it does not pass
    print("gpt_torch_check: no torch or h5py (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor: the floor for elements near 0
# bf16: each tensor within 1.5e-3 of its largest |ref|. Measured on gpt-tiny's case: the last
# layers' gradients agree to 1e-7 (the fp32 sums' own rounding), the first layer's, below more
# rounded products, to 7e-4; without the rounding every tensor but one is 1e-3 to 6e-3 off.
BF16_RTOL = 0.0
BF16_ATOL = 1.5e-3


def to_bf16(t):
    """t's values rounded to bfloat16 (nearest even), in t's dtype."""
    return t.to(torch.float32).to(torch.bfloat16).to(t.dtype)


class RoundedProduct(torch.autograd.Function):
    """a @ b with both operands rounded, and in backward the gradient's products rounded alike:
    da = bf16(g) @ bf16(b)ᵀ, db = bf16(a)ᵀ @ bf16(g)."""

    @staticmethod
    def forward(ctx, a, b):
        a, b = to_bf16(a), to_bf16(b)
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        g = to_bf16(g)
        return g @ b.transpose(-2, -1), a.transpose(-2, -1) @ g


class bf16_products(TorchFunctionMode):
    """Within it, F.linear and matmul (the @ of the attention) are RoundedProducts."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunction():
            if func is F.linear:
                x, w = args[0], args[1]
                b = args[2] if len(args) > 2 else kwargs.get("bias")
                y = RoundedProduct.apply(x.reshape(-1, x.shape[-1]), w.t())
                y = y.reshape(*x.shape[:-1], w.shape[0])
                return y if b is None else y + b
            if func in (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__):
                return RoundedProduct.apply(*args)
            return func(*args, **kwargs)


def main():
    directory, case, t = torch_cases.load_model_case(sys.argv[1:], "gpt_torch_check", __doc__)
    s = case["shape"]
    model = torch_gpt.GPT(s["vocab"], s["block"], s["layers"], s["heads"], s["width"]).double()
    with h5py.File(os.path.join(directory, "model.h5"), "r") as f:
        torch_cases.check_stored_model(f, case, "gpt_torch_check")
        torch_gpt.load_noeira(model, f)
    bf16 = case.get("precision", "fp32") == "bf16"
    if not bf16:
        refs = reference(model, case, s, rounded=False)
        torch_cases.report("gpt_torch_check", refs, t, RTOL, ATOL,
                           "loss, logits and %d gradients" % (len(refs) - 3))
        return
    plain = reference(model, case, s, rounded=False)
    if case.get("parameters", "fp32") != "fp32":
        # The trainer's bf16 copy of the masters, made by PyTorch's conversion.
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(to_bf16(p))
    failures = []
    for name, ref in plain.items():
        torch_cases.compare(name, t[name], ref, failures, BF16_RTOL, BF16_ATOL, 0.0)
    if not failures:
        sys.exit("gpt_torch_check: the bf16 case matches the reference without rounding: "
                 "noeira's products were not bf16")
    print("without rounding the reference differs: %d of %d tensors beyond the bf16 tolerance"
          % (len(failures), len(plain)))
    refs = reference(model, case, s, rounded=True)
    torch_cases.report("gpt_torch_check", refs, t, BF16_RTOL, BF16_ATOL,
                       "bf16: loss, logits and %d gradients" % (len(refs) - 3))


def reference(model, case, s, rounded):
    """The loss, logits, their gradient and every parameter gradient of one step, in float64;
    rounded: under bf16_products."""
    model.zero_grad()
    b, seq, vocab = case["batch"], case["seq"], s["vocab"]
    ids = torch.tensor(case["ids"], dtype=torch.long).view(b, seq)
    targets = torch.tensor(case["targets"], dtype=torch.long)
    if rounded:
        with bf16_products():
            logits = model(ids)
    else:
        logits = model(ids)
    logits.retain_grad()
    loss = F.cross_entropy(logits.view(b * seq, vocab), targets)
    loss.backward()
    refs = {"loss": loss, "logits": logits, "dlogits": logits.grad}
    for name, p in torch_gpt.noeira_names(model).items():
        refs["grad/" + name] = p.grad.clone()
    return refs


if __name__ == "__main__":
    main()
