#!/usr/bin/env python3
"""Exports a fuserank model (SPEC section 2: spec YAML + safetensors) to ONNX.

  fuserank_onnx_export.py --model=DIR/NAME.yaml --out=NAME.onnx [--opset=17]

The graph scores one request: the tables of a side and an embedding width are packed
into one table (rows of table t at an offset), so each group is one Gather; the bags
come padded to the longest bag of the request, with weight 0 on the padding:
  inputs   <side>_ids_<g>      int64  [B, Tg, L]   raw ids (the graph applies the modulo)
           <side>_weights_<g>  float  [B, Tg, L]   w_i, 1 when none were sent, 0: padding
           user_dense [1, dense.user], item_dense [N, dense.item]   (when there are any)
  output   scores  float [N]
B is 1 for user groups and N for item groups. The groups (which tables, in what order)
are in the model's metadata, key `fuserank_groups` (JSON), for the code that feeds it
(bench/peers/ort_dlrm.py). `oov: reject` is the caller's check; the graph takes every id
modulo the table's rows. The `linear` cross is folded into the first top layer, as the
server folds it; fp16/bf16 tables are widened to float32. Needs numpy, PyYAML, onnx.
A model it cannot read (a spec that is no model spec, truncated weights, weights that do
not fit the spec) or an --out it cannot write: one line naming the file and why, exit 2.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np
import yaml

from fuserank_files import open_new, remove_quietly

_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


class ExportError(ValueError):
    """Input or output the export cannot use: a one-line message naming the file and the
    reason (main prints it and exits 2)."""


def read_safetensors(path):
    """{name: float32 array}, read plainly (bf16 widened by a shift). A file that is no
    safetensors, or shorter than its header says (truncated), is an ExportError naming
    `path`."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ExportError(f"{path}: truncated: {size} bytes, not even the 8-byte length "
                                  "of the header")
            (length,) = struct.unpack("<Q", head)
            if length > size - 8:
                raise ExportError(f"{path}: truncated: the header says it is {length} bytes, "
                                  f"the file has {size - 8} after the length")
            header = json.loads(f.read(length))
    except OSError as e:
        raise ExportError(f"{path}: {e.strerror}") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExportError(f"{path}: not a safetensors file (its header is not JSON: {e})") from e
    if not isinstance(header, dict):
        raise ExportError(f"{path}: not a safetensors file (its header is not a JSON object)")
    start = 8 + length
    data = np.memmap(path, dtype=np.uint8, mode="r") if size > start else np.zeros(0, np.uint8)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            shape = [int(d) for d in shape]
            begin, end = int(begin), int(end)
        except (TypeError, KeyError, ValueError) as e:
            raise ExportError(f"{path}: tensor '{name}': want dtype, shape and data_offsets "
                              "[begin, end]") from e
        if dtype not in _DTYPES:
            raise ExportError(f"{path}: tensor '{name}': dtype {dtype} is not exported")
        want = int(np.prod(shape, dtype=np.int64)) * np.dtype(_DTYPES[dtype]).itemsize
        if min(shape, default=0) < 0 or end - begin != want or begin < 0:
            raise ExportError(f"{path}: tensor '{name}': data_offsets [{begin}, {end}] do not "
                              f"hold {dtype} {shape} ({want} bytes)")
        if start + end > size:
            raise ExportError(f"{path}: truncated: tensor '{name}' ends at byte {start + end}, "
                              f"the file has {size}")
        a = data[start + begin:start + end].view(_DTYPES[dtype]).reshape(shape)
        if dtype == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = np.asarray(a, dtype=np.float32)
    return out


class Spec:
    def __init__(self, path):
        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except OSError as e:
            raise ExportError(f"--model {path}: {e.strerror}") from e
        except (UnicodeDecodeError, yaml.YAMLError) as e:
            raise ExportError(f"--model {path}: not a model spec YAML ("
                              f"{' '.join(str(e).split())})") from e
        try:
            self._read(path, doc)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            what = f"missing key {e}" if isinstance(e, KeyError) else " ".join(str(e).split())
            raise ExportError(f"--model {path}: not a model spec the export reads: "
                              f"{what}") from e

    def _read(self, path, doc):
        self.name = str(doc.get("name", ""))
        self.version = str(doc.get("version", ""))
        self.weights = os.path.join(os.path.dirname(os.path.abspath(path)), doc["weights"])
        self.tables = [dict(t) for t in doc["tables"]]
        for t in self.tables:
            t.setdefault("side", "item")
            t.setdefault("pooling", "sum")
            t.setdefault("oov", "modulo")
        dense = doc.get("dense") or {}
        self.dense_user = int(dense.get("user", 0))
        self.dense_item = int(dense.get("item", 0))
        self.bottom_mlp = [int(w) for w in doc.get("bottom_mlp") or []]
        self.interaction = doc.get("interaction", "concat")
        self.cross_dim = int(doc.get("cross_dim", 0) or 0)
        self.dcn = doc.get("dcn") or {}
        self.top_mlp = [int(w) for w in doc["top_mlp"]]


def groups_of(spec):
    """[{"side", "dim", "tables": [spec indices]}]: user groups first, then item groups,
    each by first appearance of its width."""
    groups = []
    for side in ("user", "item"):
        for i, t in enumerate(spec.tables):
            if t["side"] != side:
                continue
            g = next((g for g in groups if g["side"] == side and g["dim"] == t["dim"]), None)
            if g is None:
                g = {"side": side, "dim": int(t["dim"]), "tables": []}
                groups.append(g)
            g["tables"].append(i)
    for k, g in enumerate(groups):
        g["name"] = f"{g['side']}_ids_{k}"
        g["weights_name"] = f"{g['side']}_weights_{k}"
    return groups


class Graph:
    """A small builder over onnx.helper: nodes, initializers, fresh names."""

    def __init__(self, onnx):
        self.onnx, self.h = onnx, onnx.helper
        self.nodes, self.inits, self.count = [], [], 0

    def const(self, array, name=None):
        name = name or self.fresh("c")
        self.inits.append(self.onnx.numpy_helper.from_array(np.asarray(array), name))
        return name

    def fresh(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def op(self, kind, *inputs, **attrs):
        out = self.fresh(kind.lower())
        self.nodes.append(self.h.make_node(kind, list(inputs), [out], **attrs))
        return out

    def linear(self, x, weight, bias):  # x [N, in] -> [N, out], weight [out, in]
        return self.op("Gemm", x, self.const(weight.astype(np.float32)),
                       self.const(bias.astype(np.float32)), transB=1)


def mlp(g, x, w, prefix, count, relu_last):
    for i in range(count):
        x = g.linear(x, w[f"{prefix}.{i}.weight"], w[f"{prefix}.{i}.bias"])
        if relu_last or i + 1 < count:
            x = g.op("Relu", x)
    return x


def want(w, name, shape):
    if name not in w:
        raise ValueError(f"tensor '{name}' is missing")
    if tuple(w[name].shape) != tuple(shape):
        raise ValueError(f"tensor '{name}': shape {tuple(w[name].shape)}, want {tuple(shape)}")
    return w[name]


def pooled_group(g, spec, w, group, n_shape):
    """[N, Tg, dim] pooled vectors of one group (user groups expanded to N)."""
    tables = [spec.tables[i] for i in group["tables"]]
    rows = np.array([int(t["rows"]) for t in tables], np.int64)
    offsets = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)
    packed = np.concatenate([want(w, f"embeddings.{t['name']}.weight", (t["rows"], t["dim"]))
                             for t in tables])
    ids = g.op("Mod", group["name"], g.const(rows.reshape(1, -1, 1)), fmod=0)
    ids = g.op("Add", ids, g.const(offsets.reshape(1, -1, 1)))
    vectors = g.op("Gather", g.const(packed), ids, axis=0)  # [B, Tg, L, dim]
    weights = group["weights_name"]
    summed = g.op("ReduceSum", g.op("Mul", vectors, g.op("Unsqueeze", weights, g.const(np.array([3])))),
                  g.const(np.array([2])), keepdims=0)  # [B, Tg, dim]
    mean = np.array([t["pooling"] == "mean" for t in tables])
    if mean.any():
        total = g.op("ReduceSum", weights, g.const(np.array([2])), keepdims=0)  # [B, Tg]
        denom = g.op("Where", g.const(mean.reshape(1, -1)), total, g.const(np.float32(1)))
        zero = g.op("Equal", denom, g.const(np.float32(0)))
        safe = g.op("Where", zero, g.const(np.float32(1)), denom)
        divided = g.op("Div", summed, g.op("Unsqueeze", safe, g.const(np.array([2]))))
        summed = g.op("Where", g.op("Unsqueeze", zero, g.const(np.array([2]))),
                      g.const(np.float32(0)), divided)
    if group["side"] == "user":
        shape = g.op("Concat", n_shape, g.const(np.array([1, 1], np.int64)), axis=0)
        summed = g.op("Expand", summed, shape)
    return summed


def build(spec, w, opset=17):
    import onnx

    g = Graph(onnx)
    h = onnx.helper
    inputs = []
    groups = groups_of(spec)
    for group in groups:
        batch = 1 if group["side"] == "user" else "N"
        dims = [batch, len(group["tables"]), "L" + group["name"]]
        inputs.append(h.make_tensor_value_info(group["name"], onnx.TensorProto.INT64, dims))
        inputs.append(h.make_tensor_value_info(group["weights_name"], onnx.TensorProto.FLOAT, dims))
    dense = spec.dense_user + spec.dense_item
    if spec.dense_user:
        inputs.append(h.make_tensor_value_info("user_dense", onnx.TensorProto.FLOAT, [1, spec.dense_user]))
    if spec.dense_item:
        inputs.append(h.make_tensor_value_info("item_dense", onnx.TensorProto.FLOAT, ["N", spec.dense_item]))
    # N: from an item input (item_dense, else the first item group); a model with no item
    # inputs at all scores the one candidate shape its caller gives through user groups.
    first_item = "item_dense" if spec.dense_item else next(
        (gr["name"] for gr in groups if gr["side"] == "item"), None)
    if first_item is None:
        raise ValueError("a model needs item tables or item dense features to be exported")
    n_shape = g.op("Shape", first_item, start=0, end=1)
    parts = []  # (spec order key, tensor [N, k, dim] or [N, width], kind)
    if dense:
        x = "item_dense"
        if spec.dense_user:  # [1, du] -> [N, du]: z is per candidate even without item dense
            x = g.op("Expand", "user_dense",
                     g.op("Concat", n_shape, g.const(np.array([1], np.int64)), axis=0))
            if spec.dense_item:
                x = g.op("Concat", x, "item_dense", axis=1)
        for i, width in enumerate(spec.bottom_mlp):
            want(w, f"bottom_mlp.{i}.weight", (width, dense if i == 0 else spec.bottom_mlp[i - 1]))
        z = mlp(g, x, w, "bottom_mlp", len(spec.bottom_mlp), True)
        z_width = spec.bottom_mlp[-1] if spec.bottom_mlp else dense
    pooled = [(group, pooled_group(g, spec, w, group, n_shape)) for group in groups]
    order = [i for group in groups for i in group["tables"]]  # group order of the tables
    if spec.interaction == "dot":
        dims = {int(t["dim"]) for t in spec.tables} | ({z_width} if dense else set())
        if len(dims) != 1:
            raise ValueError(f"interaction dot: vectors of widths {sorted(dims)}")
        stacked = [p for _, p in pooled]
        if dense:
            stacked.insert(0, g.op("Unsqueeze", z, g.const(np.array([1]))))
        v = g.op("Concat", *stacked, axis=1) if len(stacked) > 1 else stacked[0]  # [N, V, d]
        count = len(spec.tables) + (1 if dense else 0)
        gram = g.op("MatMul", v, g.op("Transpose", v, perm=[0, 2, 1]))
        flat = g.op("Reshape", gram, g.const(np.array([0, count * count], np.int64)))
        # Spec position s (z first) -> position in v.
        where = ([0] if dense else []) + [order.index(i) + (1 if dense else 0)
                                          for i in range(len(spec.tables))]
        pairs = [where[i] * count + where[j] for i in range(1, count) for j in range(i)]
        x = g.op("Gather", flat, g.const(np.array(pairs, np.int64)), axis=1)
        if dense:
            x = g.op("Concat", z, x, axis=1)
        width = (z_width if dense else 0) + len(pairs)
    else:
        flats = [g.op("Reshape", p, g.const(np.array([0, -1], np.int64))) for _, p in pooled]
        columns, at = [None] * len(spec.tables), (z_width if dense else 0)
        for i in order:
            columns[i] = np.arange(at, at + int(spec.tables[i]["dim"]))
            at += int(spec.tables[i]["dim"])
        perm = np.concatenate(([np.arange(z_width)] if dense else []) + columns).astype(np.int64)
        x = g.op("Concat", *(([z] if dense else []) + flats), axis=1)
        if not np.array_equal(perm, np.arange(perm.size)):
            x = g.op("Gather", x, g.const(perm), axis=1)
        width = int(perm.size)
    top = [(f"top_mlp.{i}.weight", f"top_mlp.{i}.bias") for i in range(len(spec.top_mlp))]
    first_w = want(w, top[0][0], (spec.top_mlp[0], spec.cross_dim if spec.interaction == "linear"
                                  else width)).astype(np.float64)
    first_b = want(w, top[0][1], (spec.top_mlp[0],)).astype(np.float64)
    if spec.interaction == "linear":
        cw = want(w, "cross.weight", (spec.cross_dim, width)).astype(np.float64)
        cb = want(w, "cross.bias", (spec.cross_dim,)).astype(np.float64)
        first_w, first_b = first_w @ cw, first_w @ cb + first_b
    elif spec.interaction == "dcn":
        x = dcn(g, w, spec, x, width)
    elif spec.interaction not in ("dot", "concat"):
        raise ValueError(f"interaction {spec.interaction} is not exported")
    x = g.linear(x, first_w, first_b)
    for i in range(1, len(spec.top_mlp)):
        x = g.linear(g.op("Relu", x), want(w, top[i][0], (spec.top_mlp[i], spec.top_mlp[i - 1])),
                     want(w, top[i][1], (spec.top_mlp[i],)))
    score = g.op("Reshape", g.op("Sigmoid", x), g.const(np.array([-1], np.int64)))
    g.nodes.append(h.make_node("Identity", [score], ["scores"]))
    graph = h.make_graph(g.nodes, spec.name or "fuserank", inputs,
                         [h.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, ["N"])],
                         initializer=g.inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)],
                         producer_name="fuserank_onnx_export")
    model.ir_version = 8
    meta = [{k: gr[k] for k in ("side", "dim", "tables", "name", "weights_name")} for gr in groups]
    h.set_model_props(model, {"fuserank_groups": json.dumps(meta), "fuserank_name": spec.name,
                              "fuserank_version": spec.version})
    return model


def dcn(g, w, spec, x0, width):
    layers, rank = int(spec.dcn.get("layers", 0)), int(spec.dcn.get("low_rank", 0))
    x = x0
    for l in range(layers):
        if rank > 0:
            t = g.op("MatMul", x, g.const(want(w, f"dcn.{l}.V.weight", (rank, width)).T.copy()))
            t = g.op("MatMul", t, g.const(want(w, f"dcn.{l}.U.weight", (width, rank)).T.copy()))
        else:
            t = g.op("MatMul", x, g.const(want(w, f"dcn.{l}.W.weight", (width, width)).T.copy()))
        t = g.op("Add", t, g.const(want(w, f"dcn.{l}.bias", (width,))))
        x = g.op("Add", g.op("Mul", x0, t), x)
    return x


def check_out(out_path):
    """--out names a file in a folder that exists (checked before the model is read)."""
    folder = os.path.dirname(out_path) or "."
    if os.path.isdir(out_path):
        raise ExportError(f"--out {out_path}: is a directory, not a file")
    if not os.path.isdir(folder):
        raise ExportError(f"--out {out_path}: no folder {folder}")


def export(model_path, out_path, opset=17):
    check_out(out_path)
    spec = Spec(model_path)
    weights = read_safetensors(spec.weights)
    try:
        import onnx
    except ImportError as e:
        raise ExportError(f"the onnx package is needed ({e}); the venv of "
                          "bench/run_peer_bench.sh has it") from e
    try:
        model = build(spec, weights, opset)
    except ExportError:
        raise
    except (ValueError, KeyError) as e:  # the weights do not fit the spec, or a layer's shape
        what = f"tensor {e} is missing" if isinstance(e, KeyError) else str(e)
        raise ExportError(f"--model {model_path} (weights {spec.weights}): {what}") from e
    onnx.checker.check_model(model, full_check=True)
    tmp = out_path + ".tmp"
    try:
        with open_new(tmp, "wb") as f:  # never through a link or file planted there
            onnx.save(model, f)
        os.replace(tmp, out_path)
    except OSError as e:
        remove_quietly(tmp)
        raise ExportError(f"--out {out_path}: cannot write: {e.strerror or e}") from e
    return model


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="model spec YAML")
    p.add_argument("--out", required=True, help="the ONNX file to write")
    p.add_argument("--opset", type=int, default=17)
    args = p.parse_args(argv)
    try:
        model = export(args.model, args.out, args.opset)
    except ExportError as e:
        print(f"fuserank_onnx_export: error: {e}", file=sys.stderr)
        return 2
    print(f"fuserank_onnx_export: {args.out}: {len(model.graph.node)} nodes, "
          f"{os.path.getsize(args.out) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
