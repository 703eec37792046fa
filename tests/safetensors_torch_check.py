#!/usr/bin/python3
"""noeira's safetensors files against PyTorch's models, both ways (tests/safetensors_torch.cmake).

usage: safetensors_torch_check.py check DIR [--perturb PRESET]
       safetensors_torch_check.py write DIR

  check  loads noeira_<preset>.safetensors (written by the gtest SafetensorsTorch.WritesNoeiraModels
         under --names pytorch) into the PyTorch model of the preset with load_state_dict(strict),
         recomputes the logits of noeira_<preset>_io.safetensors's "x" in float64 and compares
         them with noeira's: |noeira - torch| <= 1e-5 * max(1, max |torch|). --perturb moves one
         weight of that preset by 1e-2 first, to show that the check can fail.
  write  writes torch_<preset>.safetensors from seeded PyTorch models (GPT-2's Conv1D layout and
         mask buffers, torchvision's I64 num_batches_tracked) and torch_<preset>_io.safetensors
         with the input and the float64 logits, for the gtest SafetensorsTorch.ReadsTorchModels.

The models: mlp = torch.nn.Sequential(Linear, ReLU, Linear, ReLU, Linear); gpt-tiny =
tests/torch_gpt.py's nanoGPT model, whose c_attn/c_proj/c_fc weights are the transpose of GPT-2's
Conv1D ones in the file; resnet18 = torchvision.models.resnet18(num_classes=10) with the 3x3
stride-1 stem and no max pooling (noeira's CIFAR variant); lstm-tiny =
tests/torch_recurrent_lm.py's embedding, two-layer nn.LSTM and linear head. Exits 0 when all
match, 1 naming every mismatch, 77 (ctest's skip) without torch or torchvision.
"""
import os
import sys

import numpy as np

import safetensors_np

try:
    import torch
    import torch.nn as nn
    import torchvision

    import torch_gpt
    import torch_recurrent_lm
except ImportError as e:  # a machine without python3-torch skips, it does not pass
    print("safetensors_torch_check: no torch or torchvision (%s): skipped" % e)
    sys.exit(77)

TOLERANCE = 1e-5
PRESETS = ("mlp", "gpt-tiny", "resnet18", "lstm-tiny")
LANGUAGE_MODELS = ("gpt-tiny", "lstm-tiny")
GPT_TINY = dict(vocab=256, block=16, layers=2, heads=2, width=32)
GPT_BATCH = 2
LSTM_TINY = dict(vocab=256, block=16, width=16, hidden=32)
CONV1D = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")


def make_model(preset):
    if preset == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    if preset == "gpt-tiny":
        return torch_gpt.GPT(**GPT_TINY)
    if preset == "lstm-tiny":
        return torch_recurrent_lm.RecurrentLm("lstm", **LSTM_TINY)
    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    model.maxpool = nn.Identity()
    return model


def model_input(preset, x):
    if preset == "mlp":
        return torch.from_numpy(x.astype(np.float64)).view(-1, 784)
    if preset in LANGUAGE_MODELS:
        return torch.from_numpy(x.astype(np.int64)).view(GPT_BATCH, -1)
    return torch.from_numpy(x.astype(np.float64)).view(-1, 3, 32, 32)


def logits_of(model, preset, x):
    with torch.no_grad():
        return model.double().eval()(model_input(preset, x)).reshape(-1).numpy()


def is_conv1d(name):
    return name.startswith("transformer.h.") and name.endswith(CONV1D)


def state_from_file(preset, tensors):
    """The file's tensors as the torch model's state_dict: GPT-2's Conv1D matrices transposed
    back to torch.nn.Linear's [out, in], the tied head filled from the token embedding."""
    state = {}
    for name, value in tensors.items():
        if preset == "gpt-tiny" and is_conv1d(name):
            value = value.T
        state[name] = torch.from_numpy(np.array(value))
    if preset == "gpt-tiny":
        state["lm_head.weight"] = state["transformer.wte.weight"]
    return state


def check(directory, perturb):
    failures = []
    for preset in PRESETS:
        tensors, metadata = safetensors_np.read(os.path.join(directory,
                                                             "noeira_%s.safetensors" % preset))
        io, _ = safetensors_np.read(os.path.join(directory, "noeira_%s_io.safetensors" % preset))
        if metadata.get("model") != preset or metadata.get("names") != "pytorch":
            failures.append("%s: metadata %s" % (preset, metadata))
        model = make_model(preset)
        state = state_from_file(preset, tensors)
        if perturb == preset:
            first = next(iter(state))
            state[first] = state[first].clone()
            state[first].view(-1)[0] += 1e-2
        model.load_state_dict(state, strict=True)  # every name and shape, or a RuntimeError
        ref = logits_of(model, preset, io["x"])
        got = io["logits"].astype(np.float64)
        worst = float(np.max(np.abs(got - ref)))
        allowed = TOLERANCE * max(1.0, float(np.max(np.abs(ref))))
        print("%-9s %d tensors, logits differ by %.3g (allowed %.3g)"
              % (preset, len(tensors), worst, allowed))
        if not worst <= allowed:
            failures.append("%s: noeira's logits differ from torch's by %.3g" % (preset, worst))
    for f in failures:
        print("safetensors_torch_check: " + f)
    if failures:
        sys.exit(1)
    print("safetensors_torch_check: noeira's exports reproduce their logits in torch")


def torch_file_tensors(preset, model):
    """What a PyTorch user's file holds: the state_dict (GPT-2's layout for the GPT, with its
    mask buffers and the tied head's copy, which noeira leaves unread)."""
    tensors = {}
    for name, value in model.state_dict().items():
        value = value.detach().numpy()
        if preset == "gpt-tiny" and is_conv1d(name):
            value = value.T
        tensors[name] = value
    if preset == "gpt-tiny":
        block = GPT_TINY["block"]
        mask = np.tril(np.ones((block, block), dtype=np.uint8)).reshape(1, 1, block, block)
        for i in range(GPT_TINY["layers"]):
            tensors["transformer.h.%d.attn.bias" % i] = mask
            tensors["transformer.h.%d.attn.masked_bias" % i] = np.array(-1e4, dtype=np.float32)
    return tensors


def write(directory):
    os.makedirs(directory, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    for preset in PRESETS:
        model = make_model(preset)
        if preset in LANGUAGE_MODELS:
            with torch.no_grad():
                for p in model.parameters():  # LayerNorm scales and biases off 1 and 0 too
                    p.uniform_(-0.4, 0.4)
            x = rng.integers(0, GPT_TINY["vocab"], GPT_BATCH * GPT_TINY["block"]).astype(np.float32)
        else:
            x = rng.uniform(-2, 2, 2 * (784 if preset == "mlp" else 3072)).astype(np.float32)
        if preset == "resnet18":
            model.train()
            with torch.no_grad():  # moves the running statistics (and num_batches_tracked to 1)
                model(torch.from_numpy(rng.uniform(-2, 2, (4, 3, 32, 32)).astype(np.float32)))
        tensors = torch_file_tensors(preset, model)
        safetensors_np.write(os.path.join(directory, "torch_%s.safetensors" % preset), tensors,
                             {"format": "pt"})
        logits = logits_of(model, preset, x)
        safetensors_np.write(os.path.join(directory, "torch_%s_io.safetensors" % preset),
                             {"x": x, "logits": logits})
        print("wrote torch_%s.safetensors (%d tensors)" % (preset, len(tensors)))


def main():
    args = sys.argv[1:]
    perturb = None
    if "--perturb" in args:
        i = args.index("--perturb")
        perturb = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2 or args[0] not in ("check", "write"):
        sys.exit(__doc__)
    torch.set_num_threads(2)
    if args[0] == "check":
        check(args[1], perturb)
    else:
        write(args[1])


if __name__ == "__main__":
    main()
