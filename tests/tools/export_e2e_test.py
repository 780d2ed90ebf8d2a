"""End to end: a torch DLRM with random weights is exported, served by fuserank-server on
loopback, and fuserank's Rank scores must match torch's forward (5e-5).

The server binary comes from $FUSERANK_SERVER (ctest passes the built target) or a
first argument that is a path. Without it every test is skipped with a message and the
process exits 77, which ctest reports as "Skipped" (never as passed).

Run: /usr/bin/python3 tests/tools/export_e2e_test.py build/bin/fuserank-server
"""

import glob
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

SKIP_EXIT_CODE = 77  # ctest SKIP_RETURN_CODE: reported as skipped, never as passed

if importlib.util.find_spec("torch") is None:
    print("SKIP: python3-torch is not installed (scripts/install-deps.sh --bench installs "
          "it); the exporter tests need it", file=sys.stderr)
    sys.exit(SKIP_EXIT_CODE)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_fixtures as fx  # noqa: E402
import fuserank_export as fe  # noqa: E402
import torch  # noqa: E402

TOLERANCE = 5e-5


def _server_binary():
    """$FUSERANK_SERVER, or a first argument that is a path (has a '/')."""
    if __name__ == "__main__" and len(sys.argv) > 1 and "/" in sys.argv[1]:
        return os.path.abspath(sys.argv.pop(1))
    return os.environ.get("FUSERANK_SERVER", "")


SERVER = _server_binary()
START_TIMEOUT_S = 30


def _free_ports(n):
    """n distinct loopback ports that were free a moment ago."""
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _generate_stubs(out_dir):
    """Python messages and gRPC stubs for proto/fuserank/v1 (out_dir is appended to
    sys.path, after the installed grpc package, so it cannot shadow it)."""
    os.makedirs(out_dir, exist_ok=True)
    protos = sorted(glob.glob(os.path.join(fx.REPO, "proto", "fuserank", "v1", "*.proto")))
    subprocess.run(["protoc", f"--python_out={out_dir}", f"--grpc_out={out_dir}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    "-I", os.path.join(fx.REPO, "proto"), *protos], check=True)
    sys.path.append(out_dir)


class Server:
    """fuserank-server on free loopback ports serving one model, CPU engine."""

    def __init__(self, binary, spec_path, work_dir):
        self.port, admin, metrics = _free_ports(3)
        self.config = os.path.join(work_dir, "fuserank.yaml")
        with open(self.config, "w") as f:
            f.write(f"server:\n"
                    f"  listen: 127.0.0.1:{self.port}\n"
                    f"  admin_listen: 127.0.0.1:{admin}\n"
                    f"  metrics_listen: 127.0.0.1:{metrics}\n"
                    f"  shutdown_grace_seconds: 1\n"
                    f"engine:\n  device: cpu\n"
                    f"model:\n  path: {spec_path}\n")
        self.log_path = os.path.join(work_dir, "server.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary, "--config", self.config], stdout=self._log,
                                     stderr=subprocess.STDOUT)

    def log(self):
        self._log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@unittest.skipUnless(SERVER and os.path.exists(SERVER),
                     f"fuserank-server not built (FUSERANK_SERVER={SERVER!r}): build the "
                     "fuserank-server target to run the end-to-end export tests")
class ExportServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc  # noqa: F401  (Debian's python3-grpcio)

        cls._tmp = tempfile.TemporaryDirectory(prefix="fuserank_export_e2e_")
        _generate_stubs(os.path.join(cls._tmp.name, "stubs"))
        from google.protobuf import json_format
        from fuserank.v1 import ranker_pb2, ranker_pb2_grpc

        cls.grpc, cls.json_format = grpc, json_format
        cls.pb, cls.pb_grpc = ranker_pb2, ranker_pb2_grpc

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def _serve(self, model, name, dtype="fp32", version="e2e-1", spec=None):
        work = tempfile.mkdtemp(dir=self._tmp.name, prefix=name)
        if spec is None:
            spec, _ = fe.export_module(model, os.path.join(work, f"{name}.yaml"), name=name,
                                       version=version, dtype=dtype)
        server = Server(SERVER, spec, work)
        self.addCleanup(server.stop)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # until it listens (it loads the model first)
            if server.proc.poll() is not None:
                self.fail(f"fuserank-server exited with {server.proc.returncode}:\n{server.log()}")
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.fail(f"fuserank-server did not listen in {START_TIMEOUT_S} s:\n"
                              f"{server.log()}")
                time.sleep(0.05)
        channel = self.grpc.insecure_channel(f"127.0.0.1:{server.port}")
        self.addCleanup(channel.close)
        stub = self.pb_grpc.RankerStub(channel)
        return stub, server

    def _rank(self, stub, server, request, top_k=0):
        message = self.json_format.ParseDict(request, self.pb.RankRequest())
        message.top_k = top_k
        try:
            return stub.Rank(message, timeout=10)
        except self.grpc.RpcError as e:
            self.fail(f"Rank failed: {e.code()}: {e.details()}\n{server.log()}")

    def _compare(self, model, name, seed, dtype="fp32", requests=6, spec=None):
        stub, server = self._serve(model, name, dtype, spec=spec)
        rng = np.random.default_rng(seed)
        for r in range(requests):
            request = fx.random_request(rng, model, int(rng.integers(1, 40)))
            expected = model.score_request(request).double().numpy()
            n = len(expected)
            top_k = int(rng.integers(1, n + 1)) if r % 2 else 0
            response = self._rank(stub, server, request, top_k)
            where = f"{name}, seed {seed}, request {r} ({n} candidates, top_k {top_k})"
            self.assertEqual(len(response.items), top_k or n, where)
            got = {}
            for item in response.items:
                self.assertLess(item.index, n, where)
                self.assertEqual(item.item_id, request["candidates"][item.index]["item_id"],
                                 where)
                self.assertLess(abs(item.score - expected[item.index]), TOLERANCE,
                                f"{where}: candidate {item.index}: fuserank {item.score}, "
                                f"torch {expected[item.index]}")
                got[item.index] = item.score
            self.assertEqual(len(got), len(response.items), f"{where}: an index twice")
            scores = [item.score for item in response.items]
            self.assertEqual(scores, sorted(scores, reverse=True), f"{where}: not sorted")
            if top_k:  # nothing left out may beat what was returned (up to the tolerance)
                left_out = [expected[i] for i in range(n) if i not in got]
                if left_out:
                    self.assertGreaterEqual(min(scores) + 2 * TOLERANCE, max(left_out), where)
        return stub, server

    def test_dot_model_scores_like_torch(self):
        self._compare(fx.make_model("dot", 101), "e2e_dot", 101)

    def test_concat_model_scores_like_torch(self):
        self._compare(fx.make_model("concat", 102), "e2e_concat", 102)

    def test_linear_model_scores_like_torch(self):
        self._compare(fx.make_model("linear", 103), "e2e_linear", 103)

    def test_dcn_model_scores_like_torch(self):
        self._compare(fx.make_model("dcn", 106), "e2e_dcn", 106)

    def test_full_rank_dcn_model_scores_like_torch(self):
        self._compare(fx.make_model("dcn_full", 107), "e2e_dcn_full", 107)

    def test_dcn_state_dict_with_torchrec_names_scores_like_torch(self):
        model = fx.make_model("dcn", 108)
        sd, mapping = fx.torchrec_state_dict(model)
        self.assertIn("inter_arch.crossnet.V_kernels.2", sd)
        work = tempfile.mkdtemp(dir=self._tmp.name, prefix="e2e_dcn_sd")
        spec, _ = fe.export_state_dict(sd, mapping, os.path.join(work, "e2e_dcn_sd.yaml"))
        self._compare(model, "e2e_dcn_sd", 108, spec=spec)

    def test_dot_state_dict_with_torchrec_names_scores_like_torchrec(self):
        # TorchRec orders the dot products (0, 1), (0, 2), ...: the exporter reorders
        # top_mlp.0's columns (dot_order: torchrec, the state_dict default).
        model = fx.make_model("dot", 109)
        sd, mapping = fx.torchrec_state_dict(model, torchrec_meaning=False)
        work = tempfile.mkdtemp(dir=self._tmp.name, prefix="e2e_dot_sd")
        spec, _ = fe.export_state_dict(sd, mapping, os.path.join(work, "e2e_dot_sd.yaml"))
        self._compare(fx.TorchRecDot(model), "e2e_dot_sd", 109, spec=spec)

    def test_fp16_tables_score_like_torch_with_rounded_tables(self):
        model = fx.with_tables(fx.make_model("dot", 104), lambda n, w: w.half().float())
        self._compare(model, "e2e_fp16", 104, dtype="fp16", requests=3)

    def test_bf16_tables_score_like_torch_with_rounded_tables(self):
        model = fx.make_model("concat", 110)
        rounded = fx.with_tables(model, lambda n, w: w.bfloat16().float())
        work = tempfile.mkdtemp(dir=self._tmp.name, prefix="e2e_bf16")
        spec, _ = fe.export_module(model, os.path.join(work, "e2e_bf16.yaml"), dtype="bf16")
        self._compare(rounded, "e2e_bf16", 110, requests=3, spec=spec)

    def test_int8_tables_score_like_torch_with_dequantized_tables(self):
        model = fx.make_model("dot", 111)
        dequantized = fx.with_tables(model, lambda n, w: torch.from_numpy(
            fe.dequantize_rows_int8(*fe.quantize_rows_int8(w.detach().numpy()))))
        work = tempfile.mkdtemp(dir=self._tmp.name, prefix="e2e_int8")
        spec, _ = fe.export_module(model, os.path.join(work, "e2e_int8.yaml"), dtype="int8")
        self._compare(dequantized, "e2e_int8", 111, requests=3, spec=spec)

    def test_response_names_the_exported_version(self):
        # A character beyond the Basic Multilingual Plane is written as UTF-8, which the
        # server's YAML reader takes (it refuses a JSON surrogate pair escape); U+2028 and
        # U+FEFF as \u escapes.
        model = fx.make_model("concat", 105)
        version = "e2e-1-\U0001f680\u2028\ufeff"
        stub, server = self._serve(model, "e2e_version", version=version)
        request = fx.random_request(np.random.default_rng(105), model, 3)
        self.assertEqual(self._rank(stub, server, request).model_version, version)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(SKIP_EXIT_CODE if result.skipped and result.testsRun == len(result.skipped) else 0)
