#!/usr/bin/env python3
"""Checks tools/fuserank_onnx_export.py against SPEC section 2: the exported graph, run
by ONNX Runtime through bench/peers/ort_dlrm.py (the ONNX peer's own feed path), against
the float64 NumPy reference of bench/peers/test_torch_peer.py on small seeded models
(every interaction, sum and mean pooling, weights, out-of-range ids, empty and absent
bags, fp16 tables, tables of two widths), to 1e-5; then the ONNX peer service answers
like the graph. Needs onnx, onnxruntime and torch (the bench venv of
bench/run_peer_bench.sh); exits 77 (skipped) without them.
Run: build/venv-peers/bin/python bench/peers/test_onnx_export.py
"""

import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401
    import torch  # noqa: F401
except ImportError as e:
    print(f"test_onnx_export: skipped, {e} (the venv of bench/run_peer_bench.sh has them)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))
import fuserank_onnx_export  # noqa: E402
import ort_dlrm  # noqa: E402
import torch_dlrm  # noqa: E402
from test_torch_peer import make_model, pb2, pb2_grpc, random_request, reference_scores, tables  # noqa: E402


def add_dcn(path, spec, w, layers, rank, seed):
    """Rewrites the model of make_model(interaction=concat) as a dcn model."""
    import json

    from test_torch_peer import write_safetensors

    rng = np.random.default_rng(seed)
    d0 = w["top_mlp.0.weight"].shape[1]
    for l in range(layers):
        if rank:
            w[f"dcn.{l}.V.weight"] = rng.uniform(-1, 1, (rank, d0)) / np.sqrt(d0)
            w[f"dcn.{l}.U.weight"] = rng.uniform(-1, 1, (d0, rank)) / np.sqrt(rank)
        else:
            w[f"dcn.{l}.W.weight"] = rng.uniform(-1, 1, (d0, d0)) / np.sqrt(d0)
        w[f"dcn.{l}.bias"] = rng.uniform(-0.5, 0.5, d0)
    w = {k: v.astype(np.float32).astype(np.float64) for k, v in w.items()}
    write_safetensors(os.path.join(os.path.dirname(path), "m.safetensors"),
                      {k: v.astype(np.float32) for k, v in w.items()})
    spec.update(interaction="dcn", dcn={"layers": layers, "low_rank": rank})
    with open(path, "w") as f:
        json.dump(spec, f)
    return w


def concat_h(spec, w, request, cand):
    """concat(V) of one candidate (SPEC section 2, steps 1-4), float64."""
    user = {f.name: f for f in request.user_features}
    item = {f.name: f for f in cand.features}
    vecs = []
    for t in spec["tables"]:
        f = (user if t["side"] == "user" else item).get(t["name"])
        e, total = np.zeros(t["dim"]), 0.0
        for i, id_ in enumerate(f.ids if f else []):
            weight = f.weights[i] if len(f.weights) else 1.0
            e += weight * w[f"embeddings.{t['name']}.weight"][id_ % t["rows"]]
            total += weight
        if t.get("pooling") == "mean":
            e = e / total if total != 0 else np.zeros(t["dim"])
        vecs.append(e)
    x = np.array(list(request.user_dense) + list(cand.dense), np.float64)
    if x.size:
        for i in range(len(spec["bottom_mlp"])):
            x = np.maximum(w[f"bottom_mlp.{i}.weight"] @ x + w[f"bottom_mlp.{i}.bias"], 0)
        vecs.insert(0, x)
    return np.concatenate(vecs)


def dcn_reference(spec, w, request):
    """The dcn cross (SPEC section 2, step 4) over concat(V), then the top MLP."""
    layers, rank = spec["dcn"]["layers"], spec["dcn"]["low_rank"]
    scores = []
    for cand in request.candidates:
        x0 = concat_h(spec, w, request, cand)
        x = x0
        for l in range(layers):
            t = (w[f"dcn.{l}.U.weight"] @ (w[f"dcn.{l}.V.weight"] @ x) if rank
                 else w[f"dcn.{l}.W.weight"] @ x)
            x = x0 * (t + w[f"dcn.{l}.bias"]) + x
        n = len(spec["top_mlp"])
        for i in range(n):
            x = w[f"top_mlp.{i}.weight"] @ x + w[f"top_mlp.{i}.bias"]
            if i + 1 < n:
                x = np.maximum(x, 0)
        scores.append(1 / (1 + np.exp(-x[0])))
    return np.array(scores)


class OnnxExportMatchesSpec(unittest.TestCase):
    def check(self, seed, weights=False, dcn=None, **model):
        with tempfile.TemporaryDirectory() as d:
            path, spec, w = make_model(d, seed, **model)
            if dcn:
                w = add_dcn(path, spec, w, *dcn, seed)
            out = os.path.join(d, "m.onnx")
            fuserank_onnx_export.export(path, out)
            peer = ort_dlrm.OrtDlrm(path, out)
            rng = np.random.default_rng(seed)
            for n in (1, 7, 33):
                request = random_request(spec, rng, n, weights=weights)
                got = peer(torch_dlrm.decode_request(peer, request))
                want = (dcn_reference if dcn else reference_scores)(spec, w, request)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                           err_msg=f"seed {seed}, {n} candidates")

    def test_dot_with_dense_sum_pooling_weights_and_oov(self):
        self.check(11, weights=True, tables=tables(("u0", "user", 50, 8, "sum"), ("u1", "user", 7, 8, "sum"),
                                                   ("i0", "item", 100, 8, "sum"), ("i1", "item", 3, 8, "sum")),
                   dense_user=2, dense_item=3, bottom=[16, 8], interaction="dot", top=[16, 4, 1])

    def test_dot_with_tables_out_of_side_order(self):
        self.check(15, weights=True, tables=tables(("i0", "item", 40, 4, "mean"), ("u0", "user", 9, 4, "sum"),
                                                   ("i1", "item", 6, 4, "sum"), ("u1", "user", 30, 4, "mean")),
                   dense_user=1, dense_item=1, bottom=[4], interaction="dot", top=[8, 1])

    def test_concat_mean_pooling_two_widths_without_bottom_mlp(self):
        self.check(12, weights=True, tables=tables(("u0", "user", 20, 4, "mean"), ("i0", "item", 30, 6, "mean"),
                                                   ("i1", "item", 5, 3, "sum"), ("i2", "item", 8, 6, "sum")),
                   dense_user=1, dense_item=2, bottom=[], interaction="concat", top=[8, 1])

    def test_linear_cross_folded_without_dense(self):
        self.check(13, tables=tables(("u0", "user", 20, 4, "sum"), ("i0", "item", 30, 4, "mean")),
                   dense_user=0, dense_item=0, bottom=[], interaction="linear", cross_dim=5, top=[6, 1])

    def test_dot_without_dense_and_fp16_tables(self):
        self.check(14, tables=tables(("u0", "user", 20, 4, "sum"), ("i0", "item", 30, 4, "sum"),
                                     ("i1", "item", 9, 4, "sum")),
                   dense_user=0, dense_item=0, bottom=[], interaction="dot", top=[4, 1], dtype="fp16")

    def test_dcn_low_rank_and_full(self):
        for seed, rank in ((16, 2), (17, 0)):
            self.check(seed, weights=True, dcn=(2, rank),
                       tables=tables(("u0", "user", 20, 4, "sum"), ("i0", "item", 30, 4, "mean")),
                       dense_user=1, dense_item=2, bottom=[3], interaction="concat", top=[6, 1])


class OrtPeerServes(unittest.TestCase):
    def test_service_answers_like_the_graph_and_rejects_bad_requests(self):
        import grpc

        with tempfile.TemporaryDirectory() as d:
            path, spec, w = make_model(d, 21, tables(("u0", "user", 20, 4, "sum"), ("i0", "item", 30, 4, "sum")),
                                       1, 2, [4], "dot", [4, 1])
            out = os.path.join(d, "m.onnx")
            fuserank_onnx_export.export(path, out)
            proc = subprocess.Popen([sys.executable, os.path.join(HERE, "ort_peer.py"), f"--model={path}",
                                     f"--onnx={out}", "--listen=127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
            try:
                line = ""
                while "listening on" not in line:
                    line = proc.stdout.readline()
                    self.assertTrue(line, "ort_peer.py exited before it listened")
                stub = pb2_grpc.RankerStub(grpc.insecure_channel(line.split()[-1]))
                request = random_request(spec, np.random.default_rng(3), 9, top_k=4)
                got = stub.Rank(request, timeout=30)
                want = reference_scores(spec, w, request)
                self.assertEqual([i.index for i in got.items], list(np.argsort(-want, kind="stable")[:4]))
                np.testing.assert_allclose([i.score for i in got.items], np.sort(want)[::-1][:4], rtol=1e-5)
                bad = pb2.RankRequest()
                bad.candidates.add().features.add(name="nope", ids=[1])
                with self.assertRaises(grpc.RpcError) as e:
                    stub.Rank(bad, timeout=30)
                self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            finally:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    unittest.main()
