"""The safetensors format in a few lines of numpy (Debian packages no safetensors library): an
8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}} with an
optional "__metadata__" of strings, then the tensors' little-endian bytes. For the interop tests
(tests/safetensors_torch_check.py); noeira's own reader is io/safetensors.cpp."""
import json
import struct

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
          "I8": "i1", "U8": "u1", "BOOL": "?"}
NAMES = {np.dtype(v).str if v != "?" else "|b1": k for k, v in DTYPES.items()}


def read(path):
    """-> ({name: numpy array}, {metadata})."""
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    metadata = header.pop("__metadata__", {})
    data = blob[8 + length:]
    tensors = {}
    for name, spec in header.items():
        begin, end = spec["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype=DTYPES[spec["dtype"]]).reshape(
            tuple(spec["shape"]))
    return tensors, metadata


def write(path, tensors, metadata=None):
    """tensors: {name: numpy array}, written in the given order."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    chunks = []
    at = 0
    for name, array in tensors.items():
        a = np.asarray(array, order="C")  # (ascontiguousarray makes a 0-d array 1-d)
        a = a.astype(a.dtype.newbyteorder("<"))
        raw = a.tobytes()
        header[name] = {"dtype": NAMES[a.dtype.str], "shape": list(a.shape),
                        "data_offsets": [at, at + len(raw)]}
        chunks.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)
