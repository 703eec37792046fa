"""A regression that noeira trains from NumPy arrays (--data npy, float targets), against the same
model, initial weights, data and optimizer in PyTorch (Debian's python3-torch).

NumPy writes 96 training and 32 test samples of 784 features with 10 float targets (a noisy
tanh of a random linear map). PyTorch builds 784-256-128-10 with ReLUs (noeira's mlp preset),
and its initial weights reach noeira through a safetensors file (--init-from, --names pytorch,
written with tests/safetensors_np.py). Each step is the whole training split (--batch 96: the data
order then only changes the order of a sum), Adam at 1e-3, a constant rate, mean squared error as
torch.nn.functional.mse_loss computes it. Every step's training loss and every epoch's test loss
must agree within 1e-4 relative; R² must be what the test loss implies.

Usage: npy_regression_torch_check.py NOEIRA WORKDIR [--perturb]
--perturb trains PyTorch at lr 1.05e-3, and the check must then report a difference (it can fail).
Exit 77: skipped (no torch)."""
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import safetensors_np  # noqa: E402

try:
    import torch
except ImportError:
    print("skipped: no torch (python3-torch)")
    sys.exit(77)

STEPS = 12
TRAIN, TEST = 96, 32
TOLERANCE = 1e-4


def write_arrays(data):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(TRAIN + TEST, 784)).astype(np.float32)
    w = rng.normal(scale=0.05, size=(784, 10)).astype(np.float32)
    y = (np.tanh(x @ w) + 0.01 * rng.normal(size=(TRAIN + TEST, 10))).astype(np.float32)
    np.save(data / "train_x.npy", x[:TRAIN])
    np.save(data / "train_y.npy", y[:TRAIN])
    np.save(data / "test_x.npy", x[TRAIN:])
    np.save(data / "test_y.npy", y[TRAIN:])
    return x, y


def noeira_run(noeira, work, init):
    run = work / "run"
    subprocess.run([noeira, "train", "--data", "npy", "--data-dir", str(work / "data"),
                    "--model", "mlp", "--init-from", str(init), "--names", "pytorch",
                    "--epochs", str(STEPS), "--batch", str(TRAIN), "--optimizer", "adam",
                    "--lr", "1e-3", "--schedule", "constant", "--log-every", "1",
                    "--threads", "1", "--out", str(run)],
                   check=True, stdout=subprocess.DEVNULL)
    records = [json.loads(line) for line in open(run / "metrics.jsonl")]
    steps = [r["loss"] for r in records if r["type"] == "step"]
    epochs = [r for r in records if r["type"] == "epoch"]
    return steps, epochs


def main():
    noeira, work = sys.argv[1], pathlib.Path(sys.argv[2])
    lr = 1.05e-3 if "--perturb" in sys.argv[3:] else 1e-3
    shutil.rmtree(work, ignore_errors=True)
    (work / "data").mkdir(parents=True)
    x, y = write_arrays(work / "data")

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    init = work / "init.safetensors"
    safetensors_np.write(init, {k: v.detach().numpy() for k, v in model.state_dict().items()})
    steps, epochs = noeira_run(noeira, work, init)

    x_train, y_train = torch.from_numpy(x[:TRAIN]), torch.from_numpy(y[:TRAIN])
    x_test, y_test = torch.from_numpy(x[TRAIN:]), torch.from_numpy(y[TRAIN:])
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    torch_steps, torch_tests = [], []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x_train), y_train)
        loss.backward()
        optimizer.step()
        torch_steps.append(loss.item())
        with torch.no_grad():
            torch_tests.append(torch.nn.functional.mse_loss(model(x_test), y_test).item())

    if len(steps) != STEPS or len(epochs) != STEPS:
        print(f"FAIL: noeira logged {len(steps)} steps and {len(epochs)} epochs, not {STEPS}")
        return 1
    spread = float(((y[TRAIN:] - y[TRAIN:].mean(axis=0)) ** 2).sum())
    worst = 0.0
    for i in range(STEPS):
        for name, ours, theirs in (("training loss", steps[i], torch_steps[i]),
                                   ("test loss", epochs[i]["test_loss"], torch_tests[i])):
            difference = abs(ours - theirs) / abs(theirs)
            worst = max(worst, difference)
            if difference > TOLERANCE:
                print(f"step {i + 1}: noeira's {name} {ours:.8g} differs from torch's "
                      f"{theirs:.8g} by {difference:.2e} relative")
                return 1
        r2 = 1.0 - epochs[i]["test_loss"] * TEST * 10 / spread
        if abs(epochs[i]["test_r2"] - r2) > 1e-6:
            print(f"step {i + 1}: noeira's R² {epochs[i]['test_r2']} is not {r2}")
            return 1
    print(f"{STEPS} steps: noeira's training and test losses match torch's within {worst:.2e} "
          f"relative (loss {torch_steps[0]:.4f} -> {torch_steps[-1]:.4f}, "
          f"test R² {epochs[-1]['test_r2']:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
