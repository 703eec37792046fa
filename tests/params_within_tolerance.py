"""Whether two parameter files (model.h5) hold the same tensors within the tolerance between world
sizes of docs/design.md ("Contracts the tests pin"): |a - b| <= 1e-4 max|a| + 1e-6 per tensor.
Read with h5py, which nobody here wrote. Usage: params_within_tolerance.py A.h5 B.h5 WHAT"""
import sys

import h5py
import numpy as np


def tensors(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, np.array(obj))
                     if isinstance(obj, h5py.Dataset) else None)
    return out


first, second = tensors(sys.argv[1]), tensors(sys.argv[2])
assert first.keys() == second.keys() and first, (first.keys(), second.keys())
for name in first:
    a, b = first[name].astype(np.float64), second[name].astype(np.float64)
    limit = 1e-4 * np.abs(a).max() + 1e-6
    worst = np.abs(a - b).max()
    assert worst <= limit, f"{name}: {worst} past {limit}"
print(f"{sys.argv[3]}: {len(first)} tensors within the tolerance")
