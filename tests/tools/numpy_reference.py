"""An independent reference for the exporter tests: reads an exported spec + safetensors
by hand and scores requests with SPEC section 2 in NumPy double precision, one candidate
at a time, written plainly. It shares no code with tools/fuserank_export.py."""

import json
import math
import os
import struct

import numpy as np
import yaml


def read_safetensors(path):
    """{name: (dtype string, ndarray)}; checks the offsets tile the data exactly."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    assert header_len % 8 == 0, f"{path}: header length {header_len} is not 8-aligned"
    header = json.loads(data[8:8 + header_len].decode("utf-8"))
    base = 8 + header_len
    header.pop("__metadata__", None)
    spans = sorted(info["data_offsets"] for info in header.values())
    end = 0
    for begin, stop in spans:
        assert begin == end, f"{path}: gap or overlap at byte {begin}"
        end = stop
    assert base + end == len(data), f"{path}: {len(data) - base - end} trailing bytes"
    tensors = {}
    for name, info in header.items():
        begin, stop = info["data_offsets"]
        raw = data[base + begin:base + stop]
        dtype = info["dtype"]
        if dtype == "F32":
            array = np.frombuffer(raw, dtype="<f4")
        elif dtype == "F16":
            array = np.frombuffer(raw, dtype="<f2")
        elif dtype == "BF16":  # the high 16 bits of a float32
            array = (np.frombuffer(raw, dtype="<u2").astype("<u4") << 16).view("<f4")
        elif dtype == "I8":
            array = np.frombuffer(raw, dtype="i1")
        else:
            raise AssertionError(f"{path}: unexpected dtype {dtype} for {name}")
        tensors[name] = (dtype, array.reshape(info["shape"]))
    return tensors


def load_model(spec_path):
    """The spec dict plus float64 weights; int8 tables are dequantized per row as
    scale * q + bias."""
    with open(spec_path) as f:
        spec = yaml.safe_load(f)
    tensors = read_safetensors(os.path.join(os.path.dirname(spec_path), spec["weights"]))
    weights = {}
    for name, (dtype, array) in tensors.items():
        weights[name] = array.astype(np.float64)
    for t in spec["tables"]:
        if spec["embedding_dtype"] == "int8":
            q = weights[f"embeddings.{t['name']}.weight"]
            qp = weights[f"embeddings.{t['name']}.qparams"]
            weights[f"embeddings.{t['name']}.weight"] = qp[:, 0:1] * q + qp[:, 1:2]
    return spec, weights, tensors


def _row(i, rows, oov):
    if 0 <= i < rows:
        return i
    assert oov == "modulo", f"id {i} out of range in a reject table"
    return ((i % rows) + rows) % rows


def _pool(table, weight, feature):
    total = np.zeros(table["dim"])
    if feature is None or not feature.get("ids"):
        return total
    ids = feature["ids"]
    ws = feature.get("weights") or [1.0] * len(ids)
    wsum = 0.0
    for i, w in zip(ids, ws):
        total = total + w * weight[_row(i, table["rows"], table.get("oov", "modulo"))]
        wsum += w
    if table.get("pooling", "sum") == "mean":
        return total / wsum if wsum != 0 else np.zeros(table["dim"])
    return total


def _layer(weights, name, x, relu):
    y = weights[f"{name}.weight"] @ x + weights[f"{name}.bias"]
    return np.maximum(y, 0.0) if relu else y


def _cross_network(spec, weights, x0):
    """x_{l+1} = x0 * (U_l V_l x_l + b_l) + x_l (W_l x_l with low_rank 0)."""
    x = x0
    for l in range(spec["dcn"]["layers"]):
        if spec["dcn"]["low_rank"]:
            y = weights[f"dcn.{l}.U.weight"] @ (weights[f"dcn.{l}.V.weight"] @ x)
        else:
            y = weights[f"dcn.{l}.W.weight"] @ x
        x = x0 * (y + weights[f"dcn.{l}.bias"]) + x
    return x


def score(spec, weights, request):
    """Scores of every candidate of `request` (a RankRequest-shaped dict), in order."""
    user = {f["name"]: f for f in request.get("user_features", [])}
    dense_total = spec["dense"]["user"] + spec["dense"]["item"]
    scores = []
    for c in request["candidates"]:
        item = {f["name"]: f for f in c.get("features", [])}
        vectors = []
        if dense_total:
            z = np.array(list(request.get("user_dense", [])) + list(c.get("dense", [])),
                         dtype=np.float64)
            for i in range(len(spec["bottom_mlp"])):
                z = _layer(weights, f"bottom_mlp.{i}", z, relu=True)
            vectors.append(z)
        for t in spec["tables"]:
            feature = (user if t["side"] == "user" else item).get(t["name"])
            vectors.append(_pool(t, weights[f"embeddings.{t['name']}.weight"], feature))
        if spec["interaction"] == "concat":
            h = np.concatenate(vectors)
        elif spec["interaction"] == "linear":
            h = _layer(weights, "cross", np.concatenate(vectors), relu=False)
        elif spec["interaction"] == "dcn":
            h = _cross_network(spec, weights, np.concatenate(vectors))
        else:
            dots = [float(vectors[i] @ vectors[j])
                    for i in range(1, len(vectors)) for j in range(i)]
            h = np.array(([*vectors[0]] if dense_total else []) + dots)
        layers = len(spec["top_mlp"])
        for i in range(layers):
            h = _layer(weights, f"top_mlp.{i}", h, relu=i + 1 < layers)
        scores.append(1.0 / (1.0 + math.exp(-h[0])))
    return np.array(scores)
