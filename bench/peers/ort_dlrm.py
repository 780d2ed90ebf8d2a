"""The fuserank model in ONNX Runtime: the ONNX peer's engine.

The graph comes from tools/fuserank_onnx_export.py (its docstring names the inputs).
A request is decoded as the PyTorch peer decodes it (torch_dlrm.decode_request: the same
checks, the same errors), then each group of tables is padded into the [B, Tg, L] id and
weight arrays the graph takes. One thread, sequential execution, all graph optimizations.
"""

import json
import os
import sys

import numpy as np

import torch_dlrm

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))
import fuserank_onnx_export  # noqa: E402


class OrtDlrm:
    """Holds an onnxruntime session and the spec decode_request needs (no torch weights)."""

    def __init__(self, spec_path, onnx_path, threads=1):
        import onnxruntime as ort

        self.spec = torch_dlrm.ModelSpec(spec_path)
        tables = self.spec.tables
        self.user_tables = [i for i, t in enumerate(tables) if t.side == "user"]
        self.item_tables = [i for i, t in enumerate(tables) if t.side == "item"]
        self.user_index = {tables[i].name: k for k, i in enumerate(self.user_tables)}
        self.item_index = {tables[i].name: k for k, i in enumerate(self.item_tables)}
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
        meta = self.session.get_modelmeta().custom_metadata_map
        self.groups = json.loads(meta["fuserank_groups"])
        expected = fuserank_onnx_export.groups_of(fuserank_onnx_export.Spec(spec_path))
        if [g["tables"] for g in self.groups] != [g["tables"] for g in expected]:
            raise ValueError(f"{onnx_path} was exported from another model than {spec_path}")
        self.inputs = {i.name for i in self.session.get_inputs()}

    def feeds(self, batch):
        """torch_dlrm.Batch -> the session's inputs (NumPy)."""
        n = batch.n
        feeds = {}
        for g in self.groups:
            if g["side"] == "user":
                bags = []
                for t in g["tables"]:
                    ids, weights = batch.user_bags[self.user_tables.index(t)]
                    bags.append((ids.numpy(), np.zeros(1, np.int64), weights))
                rows = 1
            else:
                bags = [batch.item_bags[self.item_tables.index(t)] for t in g["tables"]]
                bags = [(ids.numpy(), offsets.numpy(), weights) for ids, offsets, weights in bags]
                rows = n
            for k, (ids, _, _) in enumerate(bags):
                table = self.spec.tables[g["tables"][k]]
                if table.oov == "reject" and ids.size and ((ids < 0) | (ids >= table.rows)).any():
                    raise torch_dlrm.BadRequest(
                        f"table '{table.name}': id out of range [0, {table.rows})")
            counts = [np.diff(offsets, append=ids.size) for ids, offsets, _ in bags]
            length = max(1, max(int(c.max()) if c.size else 0 for c in counts))
            pad_ids = np.zeros((rows, len(bags), length), np.int64)
            pad_w = np.zeros((rows, len(bags), length), np.float32)
            for k, ((ids, offsets, weights), c) in enumerate(zip(bags, counts)):
                if not ids.size:
                    continue
                bag = np.repeat(np.arange(rows), c)
                position = np.arange(ids.size) - np.repeat(offsets, c)
                pad_ids[bag, k, position] = ids
                pad_w[bag, k, position] = 1.0 if weights is None else weights.numpy()
            feeds[g["name"]] = pad_ids
            feeds[g["weights_name"]] = pad_w
        if "user_dense" in self.inputs:
            feeds["user_dense"] = batch.user_dense.numpy()
        if "item_dense" in self.inputs:
            feeds["item_dense"] = batch.item_dense.numpy()
        return feeds

    def run(self, feeds):
        return self.session.run(["scores"], feeds)[0]

    def __call__(self, batch):
        return self.run(self.feeds(batch))


def rank(model, request):
    """[(index, score)] best first, ties by lower index, cut to top_k (0: all)."""
    n = len(request.candidates)
    if n == 0:
        return []
    scores = model(torch_dlrm.decode_request(model, request))
    k = n if request.top_k == 0 or request.top_k >= n else request.top_k
    order = np.argsort(-scores, kind="stable")[:k]
    return list(zip(order.tolist(), scores[order].tolist()))
