"""Minimal safetensors reader and writer on NumPy (Debian ships no python3-safetensors).

Format: an 8-byte little-endian header length N, N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
then the tensor bytes; offsets are relative to the end of the header.
Tensors are memory-mapped copy-on-write, never read eagerly. BF16 comes back as
uint16 (NumPy has no bfloat16): convert with torch (see torch_dlrm.py).
"""

import json
import struct

import numpy as np

_NP_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
}


def read_header(path):
    """Returns (header dict without __metadata__, metadata dict, data start offset)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n > 100 * 1024 * 1024:
            raise ValueError(f"{path}: header length {n} is implausible")
        header = json.loads(f.read(n))
    metadata = header.pop("__metadata__", {}) or {}
    return header, metadata, 8 + n


def load(path):
    """Returns {name: (dtype string, np.ndarray view of the file)}."""
    header, _, start = read_header(path)
    mapped = np.memmap(path, dtype=np.uint8, mode="c")
    tensors = {}
    for name, info in header.items():
        dtype = info["dtype"]
        if dtype not in _NP_DTYPES:
            raise ValueError(f"{path}: tensor '{name}': unsupported dtype {dtype}")
        begin, end = info["data_offsets"]
        shape = tuple(int(d) for d in info["shape"])
        np_dtype = np.dtype(_NP_DTYPES[dtype])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * np_dtype.itemsize or start + end > mapped.size:
            raise ValueError(f"{path}: tensor '{name}': data_offsets do not match shape {shape}")
        array = mapped[start + begin : start + end].view(np_dtype).reshape(shape)
        tensors[name] = (dtype, array)
    return tensors


def save(path, tensors, metadata=None):
    """Writes {name: np.ndarray} (float32/float16/int types) as safetensors."""
    names = {np.dtype(v): k for k, v in _NP_DTYPES.items() if k != "BF16"}
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        data = array.tobytes()
        header[name] = {
            "dtype": names[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
        blobs.append(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # align the data to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
