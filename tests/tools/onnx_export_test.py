"""Tests of tools/fuserank_onnx_export.py on the shapes of dense input that
bench/peers/test_onnx_export.py does not cover: user dense features only (z, and with
dot the stacked vectors, must still be one row per candidate) and item dense only. A
torch DLRM is exported with tools/fuserank_export.py, then to ONNX, and ONNX Runtime's
scores must match torch's forward (1e-5) on random requests.

Needs torch, onnx and onnxruntime: ctest (export_onnx_tests) runs it with the bench venv's
python (build/venv-peers, made by bench/run_peer_bench.sh) when there is one, else
/usr/bin/python3; without them it exits 77 (skipped).
Run: build/venv-peers/bin/python tests/tools/onnx_export_test.py
"""

import os
import sys
import tempfile
import unittest

SKIP_EXIT_CODE = 77  # ctest SKIP_RETURN_CODE: reported as skipped, never as passed

try:
    import numpy as np
    import onnx  # noqa: F401
    import onnxruntime
    import torch  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e} (the venv of bench/run_peer_bench.sh has onnx, onnxruntime and torch)",
          file=sys.stderr)
    sys.exit(SKIP_EXIT_CODE)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_fixtures as fx  # noqa: E402
import fuserank_export as fe  # noqa: E402  (tools/ is on sys.path via export_fixtures)
import fuserank_onnx_export as oe  # noqa: E402

TOLERANCE = 1e-5


def feeds(spec, request):
    """The graph's inputs for one request: each group's bags padded to the longest bag
    with weight 0 (docs/export.md, "To ONNX")."""
    candidates = request["candidates"]
    user = {f["name"]: f for f in request.get("user_features", [])}
    out = {}
    for group in oe.groups_of(spec):
        sources = [user] if group["side"] == "user" else [
            {f["name"]: f for f in c.get("features", [])} for c in candidates]
        bags = [[src.get(spec.tables[i]["name"]) for i in group["tables"]] for src in sources]
        longest = max([len(b["ids"]) for row in bags for b in row if b] + [1])
        ids = np.zeros((len(bags), len(group["tables"]), longest), np.int64)
        weights = np.zeros(ids.shape, np.float32)
        for a, row in enumerate(bags):
            for t, bag in enumerate(row):
                if bag:
                    k = len(bag["ids"])
                    ids[a, t, :k] = bag["ids"]
                    weights[a, t, :k] = bag.get("weights") or [1.0] * k
        out[group["name"]], out[group["weights_name"]] = ids, weights
    if spec.dense_user:
        out["user_dense"] = np.array([request["user_dense"]], np.float32)
    if spec.dense_item:
        out["item_dense"] = np.array([c["dense"] for c in candidates], np.float32)
    return out


class OnnxDenseSidesTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="fuserank_onnx_export_test_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def check(self, interaction, seed, dense_user, dense_item):
        torch.manual_seed(seed)
        dims = (8, 8, 8, 8) if interaction == "dot" else (4, 6, 8, 3)
        tables = [fx.ftm.Table("user_id", "user", 50, dims[0]),
                  fx.ftm.Table("user_hist", "user", 40, dims[1], pooling="mean"),
                  fx.ftm.Table("item_id", "item", 60, dims[2]),
                  fx.ftm.Table("item_cat", "item", 20, dims[3], pooling="mean", oov="reject")]
        model = fx.ftm.spread_init(fx.ftm.DLRM(
            tables, dense_user=dense_user, dense_item=dense_item, bottom_mlp=[16, dims[0]],
            interaction=interaction, top_mlp=[16, 1], dcn_layers=2 if interaction == "dcn" else 0,
            dcn_low_rank=3 if interaction == "dcn" else 0)).eval()
        name = f"{interaction}_{dense_user}_{dense_item}"
        spec_path, _ = fe.export_module(model, os.path.join(self.tmp, f"{name}.yaml"))
        onnx_path = os.path.join(self.tmp, f"{name}.onnx")
        oe.export(spec_path, onnx_path)
        spec = oe.Spec(spec_path)
        session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(seed)
        for r in range(4):
            request = fx.random_request(rng, model, int(rng.integers(1, 12)))
            expected = model.score_request(request).double().numpy()
            got = session.run(["scores"], feeds(spec, request))[0]
            self.assertEqual(got.shape, expected.shape)
            diff = np.abs(got - expected)
            self.assertLess(diff.max(), TOLERANCE, f"{name}, seed {seed}, request {r}: "
                            f"candidate {diff.argmax()} differs by {diff.max():.3g}")

    def test_user_dense_only(self):
        for seed, interaction in enumerate(("dot", "concat", "dcn"), start=91):
            with self.subTest(interaction=interaction):
                self.check(interaction, seed, dense_user=3, dense_item=0)

    def test_item_dense_only(self):
        for seed, interaction in enumerate(("dot", "concat"), start=94):
            with self.subTest(interaction=interaction):
                self.check(interaction, seed, dense_user=0, dense_item=2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
