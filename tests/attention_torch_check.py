#!/usr/bin/python3
"""Recomputes noeira's attention leaves in PyTorch and compares every output and gradient.

usage: attention_torch_check.py FILE [--perturb TENSOR]
  FILE      written by tests/test_attention_torch.cpp: one JSON line (tensor index and cases),
            then raw little-endian float32
  --perturb changes one element of the named noeira tensor before comparing, so that a run can
            show the check fails (tests/attention_torch.cmake registers that run too)

The reference runs in float64 with autograd, attention written out as
softmax(q·kᵀ/√d + mask)·v. Each noeira value must lie within RTOL·|ref| + ATOL·max|ref| of its
reference. Exits 0 when all match, 1 naming every mismatch, 77 (ctest's skip) without torch.
"""
import math
import sys

import torch_cases

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a machine without python3-torch skips, it does not pass
    print("attention_torch_check: no torch (%s): skipped" % e)
    sys.exit(77)

RTOL = 1e-5
ATOL = 1e-6  # times the largest |ref| of the tensor: the floor for elements near 0


def leaf(array):
    return torch.tensor(array, dtype=torch.float64, requires_grad=True)


def heads(x, n):  # [B, T, n·D] -> [B, n, T, D]
    b, t, w = x.shape
    return x.view(b, t, n, w // n).transpose(1, 2)


def merge(x):  # [B, H, T, D] -> [B, T, H·D]
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def attention(q, k, v, causal, lengths):
    """softmax(q·kᵀ/√d + mask)·v on [B, H, T, D]; queries are the last tq of tk positions."""
    tq, tk, d = q.shape[2], k.shape[2], q.shape[3]
    mask = torch.zeros(q.shape[0], 1, tq, tk, dtype=q.dtype)
    keys = torch.arange(tk)
    if causal:
        positions = tk - tq + torch.arange(tq)
        mask = mask.masked_fill(keys[None, None, None, :] > positions[None, None, :, None],
                                float("-inf"))
    if lengths is not None:
        for b, n in enumerate(lengths):
            mask[b, :, :, n:] = float("-inf")
    return F.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + mask, dim=-1) @ v


def rope(x, base, interleaved):
    """Pair i of every head turned by t·base^(-2i/d), positions 0..: elements (2i, 2i+1) when
    interleaved (RoFormer), else Hugging Face's Llama form, x·cos + rotate_half(x)·sin over the
    frequencies repeated, which pairs (i, i + d/2)."""
    t, d = x.shape[2], x.shape[3]
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None, :]
    if interleaved:
        c, s = torch.cos(angle), torch.sin(angle)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)
    emb = torch.cat((angle, angle), dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * torch.cos(emb) + torch.cat((-x2, x1), dim=-1) * torch.sin(emb)


def linear(x, t, prefix, name):
    return x @ t[prefix + "/param/" + name + ".weight"].T + t[prefix + "/param/" + name + ".bias"]


def sdpa_case(case, t, name):
    h = case["heads"]
    inputs = {p: leaf(t[name + "/" + p]) for p in ("q", "k", "v")}
    y = merge(attention(*(heads(inputs[p], h) for p in ("q", "k", "v")), case["causal"],
                        case["lengths"]))
    return y, {"d" + p: x for p, x in inputs.items()}, {}


def params_of(t, name):
    prefix = name + "/param/"
    return {k[len(prefix):]: leaf(v) for k, v in t.items() if k.startswith(prefix)}


def self_attention_case(case, t, name):
    x = leaf(t[name + "/x"])
    params = params_of(t, name)
    p = {name + "/param/" + k: v for k, v in params.items()}
    h, kvh = case["heads"], case["kv_heads"]
    c = x.shape[2]
    kv_width = kvh * (c // h)
    q, k, v = linear(x, p, name, "qkv").split([c, kv_width, kv_width], dim=-1)
    q, k, v = heads(q, h), heads(k, kvh), heads(v, kvh)
    if case["rope"]:
        rotary = case["rope_base"], case["rope_interleaved"]
        q, k = rope(q, *rotary), rope(k, *rotary)
    k, v = k.repeat_interleave(h // kvh, dim=1), v.repeat_interleave(h // kvh, dim=1)
    y = linear(merge(attention(q, k, v, case["causal"], case["lengths"])), p, name, "proj")
    return y, {"dx": x}, params


def cross_attention_case(case, t, name):
    x, memory = leaf(t[name + "/x"]), leaf(t[name + "/memory"])
    params = params_of(t, name)
    p = {name + "/param/" + k: v for k, v in params.items()}
    h, kvh = case["heads"], case["kv_heads"]
    kv_width = kvh * (x.shape[2] // h)
    q = heads(linear(x, p, name, "q"), h)
    k, v = linear(memory, p, name, "kv").split([kv_width, kv_width], dim=-1)
    k = heads(k, kvh).repeat_interleave(h // kvh, dim=1)
    v = heads(v, kvh).repeat_interleave(h // kvh, dim=1)
    y = linear(merge(attention(q, k, v, False, case["lengths"])), p, name, "proj")
    return y, {"dx": x, "dmemory": memory}, params


KINDS = {"sdpa": sdpa_case, "self_attention": self_attention_case,
         "cross_attention": cross_attention_case}


def compare(label, got, ref, failures):
    return torch_cases.compare(label, got, ref, failures, RTOL, ATOL)


def main():
    args = sys.argv[1:]
    perturb = torch_cases.take_perturb(args)
    cases, t = torch_cases.load(args[0])
    if perturb is not None:
        torch_cases.perturb(t, perturb, "attention_torch_check")
    failures = []
    checked = 0
    for case in cases:
        name = case["name"]
        y, inputs, params = KINDS[case["kind"]](case, t, name)
        (y * torch.tensor(t[name + "/dy"], dtype=torch.float64)).sum().backward()
        worst = compare(name + "/y", t[name + "/y"], y, failures)
        for grad_name, x in inputs.items():
            worst = max(worst, compare(name + "/" + grad_name, t[name + "/" + grad_name], x.grad,
                                       failures))
        for param_name, p in params.items():
            worst = max(worst, compare(name + "/grad/" + param_name,
                                       t[name + "/grad/" + param_name], p.grad, failures))
        checked += 1 + len(inputs) + len(params)
        print("%-40s largest difference %.3f of the allowed" % (name, worst))
    if not cases or checked == 0:
        sys.exit("attention_torch_check: the file holds no case")
    for f in failures:
        print("attention_torch_check: " + f)
    if failures:
        sys.exit(1)
    print("attention_torch_check: %d tensors of %d cases match torch" % (checked, len(cases)))


if __name__ == "__main__":
    main()
