#!/usr/bin/python3
"""Checks the PyTorch peer against SPEC section 2, computed plainly in float64 NumPy here
(an independent reference), on small seeded models written by this test; then one Rank
call through the real peer service on 127.0.0.1.
Run: /usr/bin/python3 bench/peers/test_torch_peer.py (exit code 77: skipped, no torch)."""

import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

try:
    import torch  # noqa: F401
except ImportError:  # python3-torch comes with `scripts/install-deps.sh --bench`
    print("test_torch_peer: skipped, python3-torch is not installed")
    sys.exit(77)  # ctest SKIP_RETURN_CODE

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import proto_stubs  # noqa: E402
import torch_dlrm  # noqa: E402

pb2, pb2_grpc = proto_stubs.load()


def write_safetensors(path, arrays):
    """A plain writer, independent of safetensors_np."""
    header, blobs, offset = {}, [], 0
    for name, a in arrays.items():
        data = np.ascontiguousarray(a).tobytes()
        kind = {np.float32: "F32", np.float16: "F16"}[a.dtype.type]
        header[name] = {"dtype": kind, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def make_model(directory, seed, tables, dense_user, dense_item, bottom, interaction, top,
               cross_dim=0, dtype="fp32"):
    """Writes spec + weights; returns the spec path and the weights as float64 arrays."""
    rng = np.random.default_rng(seed)
    arrays = {}
    store = np.float16 if dtype == "fp16" else np.float32
    for t in tables:
        arrays[f"embeddings.{t['name']}.weight"] = rng.normal(0, 0.5, (t["rows"], t["dim"])).astype(store)

    def layers(prefix, widths, width):
        for i, out in enumerate(widths):
            arrays[f"{prefix}.{i}.weight"] = rng.uniform(-1, 1, (out, width)).astype(np.float32) / np.float32(np.sqrt(width))
            arrays[f"{prefix}.{i}.bias"] = rng.uniform(-0.5, 0.5, out).astype(np.float32)
            width = out
        return width

    z = layers("bottom_mlp", bottom, dense_user + dense_item) if dense_user + dense_item else 0
    n = len(tables) + (1 if z else 0)
    concat = z + sum(t["dim"] for t in tables)
    if interaction == "dot":
        width = z + n * (n - 1) // 2
    elif interaction == "concat":
        width = concat
    else:
        arrays["cross.weight"] = rng.uniform(-1, 1, (cross_dim, concat)).astype(np.float32) / np.float32(np.sqrt(concat))
        arrays["cross.bias"] = rng.uniform(-0.5, 0.5, cross_dim).astype(np.float32)
        width = cross_dim
    layers("top_mlp", top, width)
    write_safetensors(os.path.join(directory, "m.safetensors"), arrays)
    spec = {"name": "m", "version": "7", "weights": "m.safetensors", "embedding_dtype": dtype,
            "tables": tables, "dense": {"user": dense_user, "item": dense_item},
            "bottom_mlp": bottom, "interaction": interaction, "cross_dim": cross_dim, "top_mlp": top}
    path = os.path.join(directory, "m.yaml")
    with open(path, "w") as f:
        json.dump(spec, f)  # JSON is YAML
    return path, spec, {k: v.astype(np.float64) for k, v in arrays.items()}


def reference_scores(spec, w, request):
    """SPEC section 2, one candidate at a time, float64."""
    scores = []
    user = {f.name: f for f in request.user_features}
    for cand in request.candidates:
        item = {f.name: f for f in cand.features}
        vecs = []
        for t in spec["tables"]:
            f = (user if t["side"] == "user" else item).get(t["name"])
            e = np.zeros(t["dim"])
            total = 0.0
            for i, id_ in enumerate(f.ids if f else []):
                row = id_ if 0 <= id_ < t["rows"] else ((id_ % t["rows"]) + t["rows"]) % t["rows"]
                weight = f.weights[i] if len(f.weights) else 1.0
                e += weight * w[f"embeddings.{t['name']}.weight"][row]
                total += weight
            if t.get("pooling") == "mean":
                e = e / total if total != 0 else np.zeros(t["dim"])
            vecs.append(e)
        x = np.array(list(request.user_dense) + list(cand.dense), np.float64)
        if x.size:
            for i in range(len(spec["bottom_mlp"])):
                x = np.maximum(w[f"bottom_mlp.{i}.weight"] @ x + w[f"bottom_mlp.{i}.bias"], 0)
            vecs.insert(0, x)
        if spec["interaction"] == "dot":
            h = list(vecs[0]) if x.size else []
            for i in range(1, len(vecs)):
                for j in range(i):
                    h.append(float(vecs[i] @ vecs[j]))
            h = np.array(h)
        else:
            h = np.concatenate(vecs)
            if spec["interaction"] == "linear":
                h = w["cross.weight"] @ h + w["cross.bias"]
        top = spec["top_mlp"]
        for i in range(len(top)):
            h = w[f"top_mlp.{i}.weight"] @ h + w[f"top_mlp.{i}.bias"]
            if i + 1 < len(top):
                h = np.maximum(h, 0)
        scores.append(1 / (1 + np.exp(-h[0])))
    return np.array(scores)


def random_request(spec, rng, n, bag_max=3, weights=False, top_k=0):
    request = pb2.RankRequest(top_k=top_k)

    def feature(t, add):
        k = int(rng.integers(0, bag_max + 1))  # 0: an empty bag
        ids = rng.integers(-3 * t["rows"], 3 * t["rows"], k).tolist()  # out of range too
        f = add(name=t["name"], ids=ids)
        if weights and rng.random() < 0.7:
            f.weights.extend(rng.uniform(-1, 2, k).tolist())

    for t in spec["tables"]:
        if t["side"] == "user" and rng.random() < 0.9:
            feature(t, request.user_features.add)
    request.user_dense.extend(rng.normal(size=spec["dense"]["user"]).tolist())
    for c in range(n):
        cand = request.candidates.add(item_id=1000 + c)
        for t in spec["tables"]:
            if t["side"] == "item" and rng.random() < 0.9:  # absent: the zero vector
                feature(t, cand.features.add)
        cand.dense.extend(rng.normal(size=spec["dense"]["item"]).tolist())
    return request


def tables(*entries):
    return [dict(name=n, side=s, rows=r, dim=d, pooling=p) for n, s, r, d, p in entries]


class TorchPeerMatchesSpec(unittest.TestCase):
    def check(self, seed, weights=False, **model):
        with tempfile.TemporaryDirectory() as d:
            path, spec, w = make_model(d, seed, **model)
            peer = torch_dlrm.TorchDlrm(path)
            rng = np.random.default_rng(seed)
            for n in (1, 7, 33):
                request = random_request(spec, rng, n, weights=weights)
                got = peer(torch_dlrm.decode_request(peer, request)).numpy()
                want = reference_scores(spec, w, request)
                np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6,
                                           err_msg=f"seed {seed}, {n} candidates")

    def test_dot_with_dense_sum_pooling_weights_and_oov(self):
        self.check(11, weights=True, tables=tables(("u0", "user", 50, 8, "sum"), ("u1", "user", 7, 8, "sum"),
                                                   ("i0", "item", 100, 8, "sum"), ("i1", "item", 3, 8, "sum")),
                   dense_user=2, dense_item=3, bottom=[16, 8], interaction="dot", top=[16, 4, 1])

    def test_concat_mean_pooling_without_bottom_mlp(self):
        self.check(12, weights=True, tables=tables(("u0", "user", 20, 4, "mean"), ("i0", "item", 30, 6, "mean"),
                                                   ("i1", "item", 5, 3, "sum")),
                   dense_user=1, dense_item=2, bottom=[], interaction="concat", top=[8, 1])

    def test_linear_cross_without_dense(self):
        self.check(13, tables=tables(("u0", "user", 20, 4, "sum"), ("i0", "item", 30, 4, "mean")),
                   dense_user=0, dense_item=0, bottom=[], interaction="linear", cross_dim=5, top=[6, 1])

    def test_dot_without_dense_and_fp16_tables(self):
        self.check(14, tables=tables(("u0", "user", 20, 4, "sum"), ("i0", "item", 30, 4, "sum"),
                                     ("i1", "item", 9, 4, "sum")),
                   dense_user=0, dense_item=0, bottom=[], interaction="dot", top=[4, 1], dtype="fp16")


class TorchPeerRanks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.path, cls.spec, _ = make_model(
            cls.dir.name, 21, tables(("u0", "user", 50, 8, "sum"), ("i0", "item", 100, 8, "sum")),
            2, 1, [8], "dot", [8, 1])
        cls.peer = torch_dlrm.TorchDlrm(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_top_k_is_sorted_and_ties_keep_request_order(self):
        request = random_request(self.spec, np.random.default_rng(3), 10, top_k=4)
        for c in (2, 5, 7):  # three identical candidates score the same
            request.candidates[c].CopyFrom(request.candidates[0])
        ranked = torch_dlrm.rank(self.peer, pb2.RankRequest(
            user_features=request.user_features, user_dense=request.user_dense,
            candidates=request.candidates, top_k=0))
        scores = [s for _, s in ranked]
        self.assertEqual(scores, sorted(scores, reverse=True))
        ties = [i for i, s in ranked if s == ranked[[i for i, _ in ranked].index(0)][1]]
        self.assertEqual(ties, sorted(ties))
        self.assertGreaterEqual(len(ties), 4)
        self.assertEqual(torch_dlrm.rank(self.peer, request), ranked[:4])
        self.assertEqual(torch_dlrm.rank(self.peer, pb2.RankRequest()), [])

    def test_bad_requests_are_rejected(self):
        rng = np.random.default_rng(4)
        cases = {
            "unknown": lambda r: r.candidates[0].features.add(name="nope", ids=[1]),
            "twice": lambda r: r.candidates[0].features.add(name="i0", ids=[1]),
            "user table on an item": lambda r: r.candidates[0].features.add(name="u0", ids=[1]),
            "dense length": lambda r: r.candidates[1].dense.append(1.0),
            "nan": lambda r: r.user_dense.__setitem__(0, float("nan")),
            "weights length": lambda r: r.user_features[0].weights.extend([1.0] * 9),
        }
        for name, corrupt in cases.items():
            request = pb2.RankRequest(top_k=0)
            request.user_features.add(name="u0", ids=[1, 2])
            request.user_dense.extend([0.5, 0.5])
            for _ in range(2):
                request.candidates.add(features=[pb2.Feature(name="i0", ids=[3])], dense=[0.1])
            torch_dlrm.rank(self.peer, request)  # valid before the corruption
            corrupt(request)
            with self.assertRaises(torch_dlrm.BadRequest, msg=name):
                torch_dlrm.rank(self.peer, request)
        del rng

    def test_service_answers_like_the_model(self):
        import grpc
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "torch_peer.py"), f"--model={self.path}",
                                 "--listen=127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
        try:
            address = None
            for line in proc.stdout:
                if "listening on" in line:
                    address = line.split()[-1]
                    break
            self.assertIsNotNone(address, "the peer did not start")
            request = random_request(self.spec, np.random.default_rng(5), 12, top_k=5)
            with grpc.insecure_channel(address) as channel:
                stub = pb2_grpc.RankerStub(channel)
                response = stub.Rank(request, timeout=30)
                with self.assertRaises(grpc.RpcError) as bad:
                    bad_request = pb2.RankRequest()
                    bad_request.candidates.add(features=[pb2.Feature(name="nope", ids=[1])])
                    stub.Rank(bad_request, timeout=30)
                self.assertEqual(bad.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            want = torch_dlrm.rank(self.peer, request)
            self.assertEqual([(i.index, i.item_id) for i in response.items],
                             [(i, 1000 + i) for i, _ in want])
            np.testing.assert_allclose([i.score for i in response.items], [s for _, s in want], rtol=1e-6)
            self.assertEqual(response.model_version, "7")
        finally:
            proc.terminate()
            proc.wait(10)
            proc.stdout.close()


if __name__ == "__main__":
    unittest.main()
