"""The reference of tests/test_gaussian_nll.cpp: a Gaussian regression head in PyTorch (Debian's
python3-torch), 6 features -> tanh(Linear 16) -> [Linear 2 (means) | softplus(Linear 2)
(variances)], trained full batch with Adam at a constant rate on torch.nn.functional's
gaussian_nll_loss (full=False, eps=1e-6, mean), from initial weights it writes for noeira.

Usage: gaussian_nll_torch.py DIR STEPS LR
DIR holds train_x.npy, train_y.npy, test_x.npy, test_y.npy. Writes DIR/init.safetensors (the
initial weights, in noeira's names for the same Sequential<LinearTanh, Parallel<Linear,
Sequential<Linear, Softplus>>>) and DIR/torch.json: every step's training loss, and after each
step the test loss, RMSE of the means and R². Exit 77 without torch."""
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import safetensors_np  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("skipped: no torch (python3-torch)")
    sys.exit(77)


def main():
    d, steps, lr = pathlib.Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    hidden, mean, var = (torch.nn.Linear(6, 16), torch.nn.Linear(16, 2), torch.nn.Linear(16, 2))
    safetensors_np.write(d / "init.safetensors", {
        "0.weight": hidden.weight.detach().numpy(), "0.bias": hidden.bias.detach().numpy(),
        "1.0.weight": mean.weight.detach().numpy(), "1.0.bias": mean.bias.detach().numpy(),
        "1.1.0.weight": var.weight.detach().numpy(), "1.1.0.bias": var.bias.detach().numpy()})

    def forward(x):
        h = torch.tanh(hidden(x))
        return mean(h), F.softplus(var(h))

    def split(name):
        return (torch.from_numpy(np.load(d / f"{name}_x.npy")),
                torch.from_numpy(np.load(d / f"{name}_y.npy")))

    (x, y), (tx, ty) = split("train"), split("test")
    params = [*hidden.parameters(), *mean.parameters(), *var.parameters()]
    optimizer = torch.optim.Adam(params, lr=lr)
    record = {"train": [], "test": [], "rmse": [], "r2": []}
    spread = float(((ty - ty.mean(dim=0)) ** 2).sum())
    for _ in range(steps):
        optimizer.zero_grad()
        mu, v = forward(x)
        loss = F.gaussian_nll_loss(mu, y, v, eps=1e-6)
        loss.backward()
        optimizer.step()
        record["train"].append(loss.item())
        with torch.no_grad():
            mu, v = forward(tx)
            record["test"].append(F.gaussian_nll_loss(mu, ty, v, eps=1e-6).item())
            squared = float(((mu - ty) ** 2).sum())
            record["rmse"].append((squared / ty.numel()) ** 0.5)
            record["r2"].append(1.0 - squared / spread)
    (d / "torch.json").write_text(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
