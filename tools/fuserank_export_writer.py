"""Writes a validated SourceModel: the tables in the chosen dtype (int8: row-wise
quantized, docs/export.md "int8 rows"), the safetensors file and the spec YAML."""

from __future__ import annotations

import json
import os
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from fuserank_export_model import (ExportError, Layer, SourceModel, TableWeights, dot_vectors,
                                   fuserank_dot_columns)
from fuserank_files import open_new, remove_quietly

QUANT_CHUNK_ROWS = 1 << 16


def quantize_rows_int8(weight: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Row-wise int8 (docs/export.md, "int8 rows"): returns q int8 [rows, dim] and qparams
    float32 [rows, 2] = (scale, bias) with row value = scale * q + bias."""
    rows, dim = weight.shape
    q = np.empty((rows, dim), dtype=np.int8)
    qparams = np.empty((rows, 2), dtype=np.float32)
    for start in range(0, rows, QUANT_CHUNK_ROWS):
        x = weight[start:start + QUANT_CHUNK_ROWS].astype(np.float64)
        lo, hi = x.min(axis=1), x.max(axis=1)
        scale = ((hi - lo) / 255.0).astype(np.float32)
        flat = scale == 0
        bias = np.where(flat, lo, lo + 128.0 * scale.astype(np.float64)).astype(np.float32)
        step = np.where(flat, 1.0, scale.astype(np.float64))[:, None]
        levels = np.clip(np.rint((x - bias.astype(np.float64)[:, None]) / step), -128, 127)
        q[start:start + len(x)] = np.where(flat[:, None], 0, levels).astype(np.int8)
        qparams[start:start + len(x), 0] = scale
        qparams[start:start + len(x), 1] = bias
    return q, qparams


def dequantize_rows_int8(q: np.ndarray, qparams: np.ndarray) -> np.ndarray:
    """The reference dequantization: float32 scale * float32(q) + bias, per row."""
    return qparams[:, 0:1] * q.astype(np.float32) + qparams[:, 1:2]


def _table_tensors(t: TableWeights, dtype: str) -> List[Tuple[str, str, np.ndarray]]:
    name = f"embeddings.{t.name}.weight"
    if dtype == "int8":
        q, qparams = quantize_rows_int8(t.weight.numpy())
        return [(f"embeddings.{t.name}.qparams", "F32", qparams), (name, "I8", q)]
    if dtype == "fp32":
        return [(name, "F32", t.weight.numpy())]
    converted = t.weight.to(torch.float16 if dtype == "fp16" else torch.bfloat16)
    bad = ~torch.isfinite(converted)
    if bool(bad.any()):
        r, c = (int(i) for i in bad.nonzero()[0])
        raise ExportError(f"{name} ({t.source}): value {t.weight[r, c].item()} at [{r}, {c}] "
                          f"does not fit {dtype}; export with a wider --dtype")
    if dtype == "fp16":
        return [(name, "F16", converted.numpy())]
    return [(name, "BF16", converted.view(torch.int16).numpy())]


def _top_in_fuserank_order(src: SourceModel) -> List[Layer]:
    """The top MLP with top_mlp.0's dot columns (after z's) moved from src.dot_order's
    order to fuserank's (docs/export.md, "dot_order")."""
    if src.interaction != "dot" or src.dot_order == "fuserank":
        return src.top_mlp
    first = src.top_mlp[0]
    n = dot_vectors(src)
    z = int(first.weight.shape[1]) - n * (n - 1) // 2
    dots = [z + c for c in fuserank_dot_columns(src.dot_order, n)]
    columns = torch.tensor(list(range(z)) + dots)
    return [Layer(first.source, first.weight[:, columns].contiguous(), first.bias),
            *src.top_mlp[1:]]


def model_tensors(src: SourceModel, dtype: str) -> List[Tuple[str, str, np.ndarray]]:
    """(name, safetensors dtype, array) in file order: the float32 layers, then the tables
    (int8: every qparams before every table), so no tensor starts misaligned.
    REQUIRES: validate(src) passed."""
    out: List[Tuple[str, str, np.ndarray]] = []
    layers = [(f"bottom_mlp.{i}", l) for i, l in enumerate(src.bottom_mlp)]
    layers += [("cross", src.cross)] if src.interaction == "linear" else []
    layers += [(f"top_mlp.{i}", l) for i, l in enumerate(_top_in_fuserank_order(src))]
    for name, layer in layers:
        out.append((f"{name}.weight", "F32", layer.weight.numpy()))
        out.append((f"{name}.bias", "F32", layer.bias.numpy()))
    for l, layer in enumerate(src.dcn):
        if layer.v is not None:
            out.append((f"dcn.{l}.V.weight", "F32", layer.v.numpy()))
            out.append((f"dcn.{l}.U.weight", "F32", layer.u.numpy()))
        else:
            out.append((f"dcn.{l}.W.weight", "F32", layer.u.numpy()))
        out.append((f"dcn.{l}.bias", "F32", layer.bias.numpy()))
    tables = [_table_tensors(t, dtype) for t in src.tables]
    out += [x for ts in tables for x in ts if x[1] == "F32"]
    out += [x for ts in tables for x in ts if x[1] != "F32"]
    return out


def write_safetensors(path: str, tensors: Sequence[Tuple[str, str, np.ndarray]],
                      metadata: Optional[Mapping[str, str]] = None) -> None:
    """8-byte little-endian header size, the JSON header padded with spaces to a multiple
    of 8, then the tensors back to back in the given order (through path + '.tmp', which
    is removed if the write fails)."""
    tmp = path + ".tmp"
    try:
        write_safetensors_file(tmp, tensors, metadata)
        os.replace(tmp, path)
    finally:
        remove_quietly(tmp)


def write_safetensors_file(path: str, tensors: Sequence[Tuple[str, str, np.ndarray]],
                           metadata: Optional[Mapping[str, str]] = None) -> None:
    """The safetensors bytes written to `path` itself, flushed to disk (a caller renames
    the file into place)."""
    header: Dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    arrays = []
    for name, dtype, array in tensors:
        array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        arrays.append(array)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open_new(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for array in arrays:
            f.write(array.reshape(-1).view(np.uint8).data)
        f.flush()
        os.fsync(f.fileno())


# Characters a YAML reader may take for line breaks (YAML 1.1) or refuse as non-printable:
# written as \u escapes, which every YAML reader decodes.
_YAML_ESCAPED = {c: f"\\u{ord(c):04x}" for c in "\u2028\u2029\ufeff\ufffe\uffff"}


def yaml_string(s: str) -> str:
    """`s` as a double-quoted YAML scalar: a JSON string with the text kept as UTF-8 (a
    JSON \\u escape of a character beyond U+FFFF is a surrogate pair, which YAML refuses)."""
    return json.dumps(s, ensure_ascii=False).translate(str.maketrans(_YAML_ESCAPED))


def spec_yaml(src: SourceModel, name: str, version: str, weights: str, dtype: str) -> str:
    q = yaml_string
    lines = [
        "# Written by tools/fuserank_export.py (SPEC section 2).",
        f"name: {q(name)}",
        f"version: {q(version)}",
        f"weights: {q(weights)}",
        f"embedding_dtype: {dtype}",
        "tables:" if src.tables else "tables: []",
    ]
    for t in src.tables:
        rows, dim = t.weight.shape
        lines.append(f"  - {{name: {q(t.name)}, side: {t.side}, rows: {rows}, dim: {dim}, "
                     f"pooling: {t.pooling}, oov: {t.oov}}}")
    widths = lambda layers: "[" + ", ".join(str(l.weight.shape[0]) for l in layers) + "]"  # noqa
    lines += [
        f"dense: {{user: {src.dense_user}, item: {src.dense_item}}}",
        f"bottom_mlp: {widths(src.bottom_mlp)}",
        f"interaction: {src.interaction}",
        f"cross_dim: {src.cross.weight.shape[0] if src.interaction == 'linear' else 0}",
        f"top_mlp: {widths(src.top_mlp)}",
    ]
    if src.interaction == "dcn":
        lines.insert(-1, f"dcn: {{layers: {len(src.dcn)}, low_rank: {src.dcn_low_rank()}}}")
    return "\n".join(lines) + "\n"
