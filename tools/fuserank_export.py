#!/usr/bin/python3
"""Exports a PyTorch DLRM-style model to fuserank's model format (SPEC section 2).

  fuserank_export.py --module PKG.MOD:FACTORY [--mapping M.yaml] --out DIR/NAME.yaml
  fuserank_export.py --state-dict FILE.pt --mapping M.yaml --out DIR/NAME.yaml
      [--name NAME] [--version V] [--dtype fp32|fp16|bf16|int8]

Writes DIR/NAME.yaml (the spec) and DIR/NAME.safetensors (the weights) beside it, each
through a temporary file renamed into place, the weights first. The module contract,
the mapping file, the dtypes and the int8 row layout are in docs/export.md. Every
problem with the input (a missing key, a wrong shape, a layer fuserank cannot serve)
exits with status 2 and a message naming the tensor or key.

Run with Debian's /usr/bin/python3 (python3-torch, python3-numpy, python3-yaml).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import importlib.util
import json
import os
import re
import struct
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn
import yaml

DTYPES = ("fp32", "fp16", "bf16", "int8")
SIDES = ("user", "item")
POOLINGS = ("sum", "mean")
OOVS = ("modulo", "reject")
INTERACTIONS = ("concat", "dot", "linear")
MAX_ROWS = 2**31 - 1
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
MAPPING_KEYS = ("tables", "dense", "bottom_mlp", "interaction", "cross", "top_mlp")
TABLE_KEYS = ("name", "key", "side", "pooling", "oov")
QUANT_CHUNK_ROWS = 1 << 16


class ExportError(Exception):
    """A problem with the input model or mapping; the message names the tensor or key."""


@dataclasses.dataclass
class Layer:
    source: str  # where it came from, for messages
    weight: torch.Tensor  # float32 [out, in]
    bias: torch.Tensor  # float32 [out]


@dataclasses.dataclass
class TableWeights:
    name: str
    side: str
    pooling: str
    oov: str
    source: str
    weight: torch.Tensor  # float32 [rows, dim]


@dataclasses.dataclass
class SourceModel:
    """A model gathered from a module or a state_dict, before validation and writing."""

    tables: List[TableWeights]
    dense_user: int
    dense_item: int
    bottom_mlp: List[Layer]
    interaction: str
    cross: Optional[Layer]
    top_mlp: List[Layer]


def _float_tensor(value: Any, what: str) -> torch.Tensor:
    """`value` as a float32 CPU tensor; non-float or non-finite values are errors."""
    if isinstance(value, nn.Parameter) or torch.is_tensor(value):
        t = value.detach()
    else:
        raise ExportError(f"{what}: expected a tensor, got {type(value).__name__}")
    if not t.is_floating_point():
        raise ExportError(f"{what}: expected a floating-point tensor, got {t.dtype}")
    t = t.to(device="cpu", dtype=torch.float32).contiguous()
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise ExportError(f"{what}: element {list(index)} is {t[index].item()}")
    return t


def _choice(value: Any, choices: Sequence[str], what: str) -> str:
    if value not in choices:
        raise ExportError(f"{what}: must be one of {' | '.join(choices)}, got {value!r}")
    return value


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ExportError(f"{what}: must be an integer >= 0, got {value!r}")
    return value


# ---- reading a module -------------------------------------------------------------------


def _linear_layer(module: nn.Module, what: str) -> Layer:
    weight = _float_tensor(module.weight, f"{what}.weight")
    if module.bias is None:
        bias = torch.zeros(weight.shape[0])
    else:
        bias = _float_tensor(module.bias, f"{what}.bias")
    return Layer(what, weight, bias)


def _flatten(seq: nn.Module, what: str) -> List[Tuple[str, nn.Module]]:
    if not isinstance(seq, nn.Sequential):
        return [(what, seq)]
    out: List[Tuple[str, nn.Module]] = []
    for name, child in seq.named_children():
        out += _flatten(child, f"{what}.{name}")
    return out


def _mlp_layers(seq: Optional[nn.Module], what: str, relu_after_last: bool) -> List[Layer]:
    """Linear layers of an nn.Sequential of Linear and ReLU (Dropout and Identity are
    skipped; a trailing Sigmoid in top_mlp is taken as the score's sigmoid)."""
    if seq is None:
        return []
    mods = [(n, m) for n, m in _flatten(seq, what)
            if not isinstance(m, (nn.Identity, nn.Dropout, nn.AlphaDropout))]
    if not relu_after_last and mods and isinstance(mods[-1][1], nn.Sigmoid):
        mods.pop()
    layers: List[Layer] = []
    expect_relu = False
    for name, m in mods:
        if expect_relu:
            if not isinstance(m, nn.ReLU):
                raise ExportError(f"{name}: expected nn.ReLU after a Linear layer, got "
                                  f"{type(m).__name__} (fuserank serves Linear+ReLU MLPs)")
            expect_relu = False
        elif isinstance(m, nn.Linear):
            layers.append(_linear_layer(m, name))
            expect_relu = True
        else:
            raise ExportError(f"{name}: expected nn.Linear, got {type(m).__name__} "
                              "(fuserank serves Linear+ReLU MLPs)")
    if relu_after_last and expect_relu:
        raise ExportError(f"{what}: the bottom MLP needs a ReLU after its last Linear layer")
    if not relu_after_last and not expect_relu and layers:
        raise ExportError(f"{what}: the top MLP must end with a Linear layer, not a ReLU")
    return layers


def _module_table(name: str, bag: Any, what: str) -> Tuple[torch.Tensor, Optional[str]]:
    """The weight of one entry of `embeddings` and the pooling its module implies."""
    if torch.is_tensor(bag):
        return _float_tensor(bag, what), None
    if not hasattr(bag, "weight"):
        raise ExportError(f"{what}: expected nn.EmbeddingBag or nn.Embedding, "
                          f"got {type(bag).__name__}")
    weight = _float_tensor(bag.weight, what)
    if getattr(bag, "max_norm", None) is not None:
        raise ExportError(f"{what}: max_norm renormalizes rows at lookup; fuserank does not")
    mode = getattr(bag, "mode", None) if isinstance(bag, nn.EmbeddingBag) else None
    if mode is not None and mode not in POOLINGS:
        raise ExportError(f"{what}: EmbeddingBag mode {mode!r} is not served (sum | mean)")
    pad = getattr(bag, "padding_idx", None)
    if isinstance(bag, nn.EmbeddingBag) and pad is not None:
        if mode != "sum" or bool(weight[pad].any()):
            raise ExportError(f"{what}: EmbeddingBag padding_idx={pad} skips that id when "
                              "pooling; fuserank pools every id (allowed only with mode sum "
                              "and an all-zero padding row)")
    return weight, mode


def from_module(module: Any, mapping: Optional[Mapping] = None) -> SourceModel:
    """Reads a DLRM-style module (the contract in docs/export.md); `mapping` may give
    tables[].side/pooling/oov, dense and interaction where the module has no attribute."""
    mapping = dict(mapping or {})
    embeddings = getattr(module, "embeddings", None)
    if embeddings is None or not hasattr(embeddings, "items"):
        raise ExportError("module.embeddings: missing; expected an nn.ModuleDict (or dict) "
                          "of nn.EmbeddingBag / nn.Embedding keyed by table name")
    overrides: Dict[str, Mapping] = {}
    for i, entry in enumerate(mapping.get("tables") or []):
        _check_table_entry(entry, i, needs_key=False)
        if entry["name"] not in embeddings:
            raise ExportError(f"mapping tables[{i}]: no table {entry['name']!r} in "
                              f"module.embeddings (has: {', '.join(embeddings.keys())})")
        overrides[entry["name"]] = entry
    attr = lambda n: getattr(module, n, None) or {}  # noqa: E731
    tables = []
    for name, bag in embeddings.items():
        what = f"module.embeddings[{name!r}]"
        weight, mode = _module_table(name, bag, what)
        o = overrides.get(name, {})
        side = o.get("side", attr("table_sides").get(name))
        if side is None:
            raise ExportError(f"{what}: no side; give module.table_sides[{name!r}] = 'user' "
                              "or 'item', or a mapping entry {name: ..., side: ...}")
        pooling = o.get("pooling", attr("table_pooling").get(name, mode or "sum"))
        oov = o.get("oov", attr("table_oov").get(name, "modulo"))
        tables.append(TableWeights(name, side, pooling, oov, what, weight))
    bottom = _mlp_layers(getattr(module, "bottom_mlp", None), "module.bottom_mlp", True)
    dense = mapping.get("dense")
    if dense is not None:
        dense_user, dense_item = _mapping_dense(dense)
    elif hasattr(module, "dense_user") or hasattr(module, "dense_item"):
        dense_user = _count(getattr(module, "dense_user", 0), "module.dense_user")
        dense_item = _count(getattr(module, "dense_item", 0), "module.dense_item")
    elif bottom:
        raise ExportError("module.dense_user / module.dense_item: missing; they say how the "
                          f"bottom MLP's {bottom[0].weight.shape[1]} inputs split into user "
                          "and item dense features (or give dense: {user: U, item: I} in "
                          "the mapping)")
    else:
        dense_user = dense_item = 0
    interaction = mapping.get("interaction", getattr(module, "interaction", None))
    if interaction is None:
        raise ExportError("module.interaction: missing; expected 'concat', 'dot' or 'linear'")
    cross = getattr(module, "cross", None)
    if cross is not None:
        if not isinstance(cross, nn.Linear):
            raise ExportError(f"module.cross: expected nn.Linear, got {type(cross).__name__}")
        cross = _linear_layer(cross, "module.cross")
    top_seq = getattr(module, "top_mlp", None)
    if top_seq is None:
        raise ExportError("module.top_mlp: missing; expected an nn.Sequential of Linear+ReLU")
    top = _mlp_layers(top_seq, "module.top_mlp", relu_after_last=False)
    return SourceModel(tables, dense_user, dense_item, bottom, interaction, cross, top)


# ---- reading a state_dict with a mapping ------------------------------------------------


def _check_table_entry(entry: Any, i: int, needs_key: bool) -> None:
    if not isinstance(entry, dict):
        raise ExportError(f"mapping tables[{i}]: expected a map like "
                          "{name: user_id, key: ..., side: user}")
    unknown = sorted(set(entry) - set(TABLE_KEYS))
    if unknown:
        raise ExportError(f"mapping tables[{i}].{unknown[0]}: unknown key "
                          f"(expected one of: {', '.join(TABLE_KEYS)})")
    for required in ("name", "key", "side") if needs_key else ("name",):
        if required not in entry:
            raise ExportError(f"mapping tables[{i}].{required}: missing")


def _mapping_dense(dense: Any) -> Tuple[int, int]:
    if not isinstance(dense, dict) or set(dense) - {"user", "item"}:
        raise ExportError(f"mapping dense: expected {{user: U, item: I}}, got {dense!r}")
    return (_count(dense.get("user", 0), "mapping dense.user"),
            _count(dense.get("item", 0), "mapping dense.item"))


def _natural_key(key: str) -> Tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in key.split("."))


def _get(state: Mapping, key: str, what: str) -> Any:
    if key not in state:
        close = difflib.get_close_matches(key, list(state.keys()), n=3)
        hint = f" (closest: {', '.join(close)})" if close else ""
        raise ExportError(f"{what}: state_dict key '{key}' not found{hint}")
    return state[key]


def _state_layers(state: Mapping, spec: Any, what: str, used: set) -> List[Layer]:
    """Linear layers named by a prefix (every 2-D '<prefix>.*weight', in natural order)
    or by an explicit list of layer names ('<name>.weight' and '<name>.bias')."""
    if spec is None:
        return []
    if isinstance(spec, str):
        prefix = spec.rstrip(".") + "."
        keys = [k for k in state if k.startswith(prefix)]
        if not keys:
            raise ExportError(f"mapping {what}: no state_dict key starts with '{prefix}'")
        bases = sorted((k[:-len(".weight")] for k in keys
                        if k.endswith(".weight") and getattr(state[k], "dim", lambda: 0)() == 2),
                       key=_natural_key)
        for k in keys:
            if k[:k.rfind(".")] not in bases or not k.endswith((".weight", ".bias")):
                raise ExportError(f"mapping {what}: state_dict key '{k}' under '{prefix}' is "
                                  "not the weight or bias of a Linear layer (fuserank serves "
                                  "Linear+ReLU MLPs)")
    elif isinstance(spec, list) and all(isinstance(s, str) for s in spec):
        bases = spec
    else:
        raise ExportError(f"mapping {what}: expected a key prefix or a list of layer names, "
                          f"got {spec!r}")
    layers = []
    for i, base in enumerate(bases):
        name = f"{what}.{i}"
        weight = _float_tensor(_get(state, base + ".weight", f"{name}.weight"), base + ".weight")
        bias = _float_tensor(_get(state, base + ".bias", f"{name}.bias"), base + ".bias")
        used.update((base + ".weight", base + ".bias"))
        layers.append(Layer(f"state_dict '{base}'", weight, bias))
    return layers


def from_state_dict(state: Mapping, mapping: Mapping) -> SourceModel:
    """Reads tensors named by `mapping` (docs/export.md, "The mapping file")."""
    if not isinstance(mapping.get("tables"), list):
        raise ExportError("mapping tables: missing; expected a list of "
                          "{name, key, side, pooling, oov}")
    used: set = set()
    tables = []
    for i, entry in enumerate(mapping["tables"]):
        _check_table_entry(entry, i, needs_key=True)
        what = f"mapping tables[{i}] ({entry['name']})"
        weight = _float_tensor(_get(state, entry["key"], what), f"state_dict '{entry['key']}'")
        used.add(entry["key"])
        tables.append(TableWeights(entry["name"], entry["side"], entry.get("pooling", "sum"),
                                   entry.get("oov", "modulo"), f"state_dict '{entry['key']}'",
                                   weight))
    dense_user, dense_item = _mapping_dense(mapping.get("dense", {}))
    if "interaction" not in mapping:
        raise ExportError("mapping interaction: missing; expected concat | dot | linear")
    if "top_mlp" not in mapping:
        raise ExportError("mapping top_mlp: missing; expected the top MLP's key prefix")
    bottom = _state_layers(state, mapping.get("bottom_mlp"), "bottom_mlp", used)
    cross = None
    if mapping.get("cross") is not None:
        if not isinstance(mapping["cross"], str):
            raise ExportError(f"mapping cross: expected a layer name, got {mapping['cross']!r}")
        cross = _state_layers(state, [mapping["cross"]], "cross", used)[0]
    top = _state_layers(state, mapping["top_mlp"], "top_mlp", used)
    unused = [k for k in state if k not in used]
    if unused:
        print(f"fuserank_export: note: {len(unused)} state_dict entries not used: "
              f"{', '.join(unused[:8])}{' ...' if len(unused) > 8 else ''}", file=sys.stderr)
    return SourceModel(tables, dense_user, dense_item, bottom, mapping["interaction"], cross,
                       top)


# ---- validation -------------------------------------------------------------------------


def _check_layer(name: str, layer: Layer, in_width: int, in_desc: str) -> int:
    w, b = layer.weight, layer.bias
    if w.dim() != 2:
        raise ExportError(f"{name}.weight ({layer.source}): expected [out, in], got shape "
                          f"{list(w.shape)}")
    if w.shape[1] != in_width:
        raise ExportError(f"{name}.weight ({layer.source}): shape {list(w.shape)} takes "
                          f"{w.shape[1]} inputs, but {in_desc} gives {in_width}")
    if list(b.shape) != [w.shape[0]]:
        raise ExportError(f"{name}.bias ({layer.source}): expected shape [{w.shape[0]}], got "
                          f"{list(b.shape)}")
    if w.shape[0] < 1:
        raise ExportError(f"{name}.weight ({layer.source}): a layer needs >= 1 output")
    return int(w.shape[0])


def validate(src: SourceModel) -> None:
    """Every rule of SPEC section 2 the served model depends on; raises ExportError."""
    seen = set()
    for i, t in enumerate(src.tables):
        tensor = f"embeddings.{t.name}.weight ({t.source})"
        if not isinstance(t.name, str) or not NAME_RE.match(t.name):
            raise ExportError(f"table {t.name!r} ({t.source}): a table name uses letters, "
                              "digits, '_' and '-'")
        if t.name in seen:
            raise ExportError(f"table {t.name!r} ({t.source}): duplicate table name")
        seen.add(t.name)
        _choice(t.side, SIDES, f"table {t.name!r} side")
        _choice(t.pooling, POOLINGS, f"table {t.name!r} pooling")
        _choice(t.oov, OOVS, f"table {t.name!r} oov")
        if t.weight.dim() != 2 or t.weight.shape[1] < 1:
            raise ExportError(f"{tensor}: expected [rows, dim], got shape {list(t.weight.shape)}")
        if not 1 <= t.weight.shape[0] <= MAX_ROWS:
            raise ExportError(f"{tensor}: rows must be in 1..{MAX_ROWS}, got {t.weight.shape[0]}")
    dense = _count(src.dense_user, "dense.user") + _count(src.dense_item, "dense.item")
    if src.bottom_mlp and dense == 0:
        raise ExportError("bottom_mlp: present, but there are no dense features "
                          "(dense.user + dense.item = 0)")
    width = dense
    for i, layer in enumerate(src.bottom_mlp):
        desc = "the dense features (dense.user + dense.item)" if i == 0 else f"bottom_mlp.{i - 1}"
        width = _check_layer(f"bottom_mlp.{i}", layer, width, desc)
    z = width if dense else 0
    _choice(src.interaction, INTERACTIONS, "interaction")
    concat = z + sum(int(t.weight.shape[1]) for t in src.tables)
    n = len(src.tables) + (1 if z else 0)
    if n == 0:
        raise ExportError("tables: the model needs at least one table or dense feature")
    if src.interaction != "linear" and src.cross is not None:
        raise ExportError(f"cross ({src.cross.source}): present, but interaction is "
                          f"{src.interaction!r} (only linear uses it)")
    if src.interaction == "dot":
        d = z or int(src.tables[0].weight.shape[1])
        for t in src.tables:
            if t.weight.shape[1] != d:
                raise ExportError(f"embeddings.{t.name}.weight ({t.source}): interaction dot "
                                  f"needs every vector {d} wide (z or the first table), got "
                                  f"dim {t.weight.shape[1]}")
        if n < 2:
            raise ExportError("interaction: dot over a single vector gives no features")
        h, h_desc = z + n * (n - 1) // 2, "the dot interaction"
    elif src.interaction == "linear":
        if src.cross is None:
            raise ExportError("cross: missing; interaction linear needs the cross nn.Linear")
        h = _check_layer("cross", src.cross, concat, "concat(z, tables)")
        h_desc = "cross"
    else:
        h, h_desc = concat, "concat(z, tables)"
    if not src.top_mlp:
        raise ExportError("top_mlp: empty; it needs at least one Linear layer (width 1 last)")
    for i, layer in enumerate(src.top_mlp):
        h = _check_layer(f"top_mlp.{i}", layer, h, h_desc if i == 0 else f"top_mlp.{i - 1}")
    if h != 1:
        last = len(src.top_mlp) - 1
        raise ExportError(f"top_mlp.{last}.weight ({src.top_mlp[-1].source}): the last layer "
                          f"must have 1 output (the score), got {h}")


# ---- writing ----------------------------------------------------------------------------


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


def model_tensors(src: SourceModel, dtype: str) -> List[Tuple[str, str, np.ndarray]]:
    """(name, safetensors dtype, array) in file order: the float32 layers, then the tables
    (int8: every qparams before every table), so no tensor starts misaligned."""
    out: List[Tuple[str, str, np.ndarray]] = []
    layers = [(f"bottom_mlp.{i}", l) for i, l in enumerate(src.bottom_mlp)]
    layers += [("cross", src.cross)] if src.interaction == "linear" else []
    layers += [(f"top_mlp.{i}", l) for i, l in enumerate(src.top_mlp)]
    for name, layer in layers:
        out.append((f"{name}.weight", "F32", layer.weight.numpy()))
        out.append((f"{name}.bias", "F32", layer.bias.numpy()))
    tables = [_table_tensors(t, dtype) for t in src.tables]
    out += [x for ts in tables for x in ts if x[1] == "F32"]
    out += [x for ts in tables for x in ts if x[1] != "F32"]
    return out


def write_safetensors(path: str, tensors: Sequence[Tuple[str, str, np.ndarray]],
                      metadata: Optional[Mapping[str, str]] = None) -> None:
    """8-byte little-endian header size, the JSON header padded with spaces to a multiple
    of 8, then the tensors back to back in the given order (through path + '.tmp')."""
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
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for array in arrays:
            f.write(array.reshape(-1).view(np.uint8).data)
    os.replace(tmp, path)


def spec_yaml(src: SourceModel, name: str, version: str, weights: str, dtype: str) -> str:
    q = json.dumps  # a JSON string is a valid double-quoted YAML scalar
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
    return "\n".join(lines) + "\n"


def export(src: SourceModel, out: str, name: Optional[str] = None, version: str = "1",
           dtype: str = "fp32") -> Tuple[str, str]:
    """Validates `src` and writes `out` (NAME.yaml) and NAME.safetensors beside it.
    Returns (spec path, weights path)."""
    _choice(dtype, DTYPES, "--dtype")
    if not out.endswith((".yaml", ".yml")):
        raise ExportError(f"--out {out}: must name the spec file, ending in .yaml")
    stem = os.path.splitext(os.path.basename(out))[0]
    name = stem if name is None else name
    if not name or not version:
        raise ExportError("--name and --version must not be empty")
    validate(src)
    tensors = model_tensors(src, dtype)
    directory = os.path.dirname(out) or "."
    os.makedirs(directory, exist_ok=True)
    weights = os.path.join(directory, stem + ".safetensors")
    write_safetensors(weights, tensors, {"format": "pt", "producer": "fuserank_export",
                                         "name": name, "version": version})
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        f.write(spec_yaml(src, name, version, os.path.basename(weights), dtype))
    os.replace(out + ".tmp", out)
    return out, weights


def export_module(module: Any, out: str, mapping: Optional[Mapping] = None,
                  **kwargs: Any) -> Tuple[str, str]:
    return export(from_module(module, mapping), out, **kwargs)


def export_state_dict(state: Mapping, mapping: Mapping, out: str,
                      **kwargs: Any) -> Tuple[str, str]:
    return export(from_state_dict(state, mapping), out, **kwargs)


# ---- command line -----------------------------------------------------------------------


def load_mapping(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            mapping = yaml.safe_load(f)
    except OSError as e:
        raise ExportError(f"--mapping {path}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise ExportError(f"--mapping {path}: invalid YAML: {e}") from e
    if not isinstance(mapping, dict):
        raise ExportError(f"--mapping {path}: expected a YAML map (tables:, top_mlp:, ...)")
    unknown = sorted(set(mapping) - set(MAPPING_KEYS))
    if unknown:
        raise ExportError(f"--mapping {path}: key '{unknown[0]}': unknown key (expected one "
                          f"of: {', '.join(MAPPING_KEYS)})")
    return mapping


def load_state_dict(path: str) -> Mapping:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError as e:
        raise ExportError(f"--state-dict {path}: no such file") from e
    except Exception as e:  # torch raises many types for a file it cannot read
        raise ExportError(f"--state-dict {path}: cannot load ({e}); save model.state_dict() "
                          "with torch.save") from e
    if not isinstance(state, Mapping):
        raise ExportError(f"--state-dict {path}: expected a dict of tensors, got "
                          f"{type(state).__name__}")
    return state


def load_module(target: str) -> Any:
    """'pkg.mod:factory' or 'path/file.py:factory': calls factory() for the module."""
    mod_name, _, attr = target.rpartition(":")
    if not mod_name or not attr:
        raise ExportError(f"--module {target}: expected PKG.MOD:FACTORY or FILE.py:FACTORY")
    try:
        if mod_name.endswith(".py"):
            spec = importlib.util.spec_from_file_location("_fuserank_export_src", mod_name)
            if spec is None or not os.path.exists(mod_name):
                raise ExportError(f"--module {target}: no file {mod_name}")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            sys.path.insert(0, os.getcwd())
            mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        raise ExportError(f"--module {target}: {e}") from e
    factory = getattr(mod, attr, None)
    if factory is None:
        raise ExportError(f"--module {target}: {mod_name} has no attribute '{attr}'")
    module = factory() if callable(factory) and not isinstance(factory, nn.Module) else factory
    if isinstance(module, nn.Module):
        module.eval()
    return module


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Export a PyTorch DLRM-style model to fuserank's YAML + safetensors.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--module", metavar="PKG.MOD:FACTORY",
                        help="a factory returning the module (or FILE.py:FACTORY)")
    source.add_argument("--state-dict", metavar="FILE", help="a torch.save'd state_dict")
    parser.add_argument("--mapping", metavar="M.yaml",
                        help="table keys, sides and layer prefixes (needed with --state-dict)")
    parser.add_argument("--out", required=True, metavar="DIR/NAME.yaml",
                        help="the spec to write; NAME.safetensors goes beside it")
    parser.add_argument("--name", help="model name (default: NAME of --out)")
    parser.add_argument("--version", default="1", help='model version (default: "1")')
    parser.add_argument("--dtype", default="fp32", choices=DTYPES,
                        help="how embedding tables are stored (default: fp32)")
    args = parser.parse_args(argv)
    if args.state_dict and not args.mapping:
        parser.error("--state-dict needs --mapping")
    try:
        mapping = load_mapping(args.mapping) if args.mapping else None
        if args.state_dict:
            src = from_state_dict(load_state_dict(args.state_dict), mapping)
        else:
            src = from_module(load_module(args.module), mapping)
        spec_path, weights_path = export(src, args.out, args.name, args.version, args.dtype)
    except ExportError as e:
        print(f"fuserank_export: error: {e}", file=sys.stderr)
        return 2
    print(f"fuserank_export: wrote {spec_path} and {weights_path} ({len(src.tables)} tables, "
          f"embedding_dtype {args.dtype}, interaction {src.interaction})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
