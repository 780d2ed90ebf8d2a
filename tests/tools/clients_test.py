#!/usr/bin/python3
"""tools/rank_client.py and tools/admin_client.py: their options and errors without a
server (--cert without --key, a missing token file, an id beyond int64, a negative top_k,
a storage: redis table without --remote-ids: exit 2 with a message, never a traceback or
an abort; no stub folder left behind), then against fuserank-server with TLS: any of
--tls, --ca, --cert/--key means TLS (--tls and --cert/--key without --ca check the server
against the system's roots, here GRPC_DEFAULT_SSL_ROOTS_FILE_PATH), none means plaintext,
which a TLS server refuses.

The server half needs $FUSERANK_SERVER and $FUSERANK_GEN_MODEL (ctest passes the built
targets) and openssl (test certificates are made in a temporary folder); without them it
is skipped, and the run exits 77 (ctest: skipped, not passed) once the other half has
passed, naming what was skipped and why. Exit 77 too without python3-grpcio /
python3-grpc-tools / python3-yaml.
Run: /usr/bin/python3 tests/tools/clients_test.py
"""
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import unittest

SKIP_EXIT_CODE = 77  # ctest SKIP_RETURN_CODE: reported as skipped, never as passed

try:
    import grpc  # noqa: F401
    import grpc_tools  # noqa: F401
    import yaml
except ImportError as e:
    print(f"SKIP: {e} (python3-grpcio, python3-grpc-tools, python3-yaml)", file=sys.stderr)
    sys.exit(SKIP_EXIT_CODE)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))
sys.path.insert(0, os.path.join(REPO, "tests", "deploy"))  # live_process_util

import fuserank_client_common  # noqa: E402
import live_process_util as live  # noqa: E402
import rank_client  # noqa: E402

ADMIN = os.path.join(REPO, "tools", "admin_client.py")
RANK = os.path.join(REPO, "tools", "rank_client.py")
SERVER = os.environ.get("FUSERANK_SERVER", "")
GEN_MODEL = os.environ.get("FUSERANK_GEN_MODEL", "")
TOKEN = "tok-clients-test"


class ClientTestBase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="fuserank_clients_test_")
        self.tmp = self._tmp.name
        self.child_tmp = os.path.join(self.tmp, "child_tmp")  # the clients' TMPDIR
        os.makedirs(self.child_tmp)

    def tearDown(self):
        self._tmp.cleanup()

    def run_client(self, script, *args, env=None):
        # Without LD_PRELOAD: a sanitizer runtime preloaded into ctest is not for Python.
        environment = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        environment.update(TMPDIR=self.child_tmp, **(env or {}))
        done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                              timeout=60, env=environment)
        self.assertNotIn("Traceback", done.stderr)
        self.assertEqual(os.listdir(self.child_tmp), [], "a stub folder was left behind")
        return done

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path


class ClientOptionsTest(ClientTestBase):
    def test_cert_and_key_go_together(self):
        pem = self.write("x.pem", "not used")
        for flags in (["--cert", pem], ["--key", pem], ["--ca", pem, "--cert", pem]):
            for script, command in ((ADMIN, ["get"]), (RANK, [])):
                with self.subTest(script=os.path.basename(script), flags=flags):
                    done = self.run_client(script, "--target", "127.0.0.1:1", *flags, *command)
                    self.assertEqual(done.returncode, 2, done.stderr)
                    self.assertIn("--cert and --key go together", done.stderr)

    def test_unreadable_tls_files_are_usage_errors(self):
        missing = os.path.join(self.tmp, "missing.pem")
        done = self.run_client(ADMIN, "--target", "127.0.0.1:1", "--ca", missing, "get")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"--ca {missing}: No such file or directory", done.stderr)

    def test_admin_input_errors_are_messages(self):
        missing = os.path.join(self.tmp, "no.token")
        done = self.run_client(ADMIN, "--token-file", missing, "get")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"--token-file {missing}: No such file or directory", done.stderr)
        done = self.run_client(ADMIN, "set", "item_id=1,99999999999999999999")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("id 99999999999999999999 is outside int64", done.stderr)

    def test_rank_input_errors_are_messages(self):
        done = self.run_client(RANK, "--top_k", "-1")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("--top_k: '-1': want an integer in 0..4294967295", done.stderr)
        missing = os.path.join(self.tmp, "none.yaml")
        done = self.run_client(RANK, "--model", missing)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"--model {missing}: No such file or directory", done.stderr)

    def test_a_model_file_that_is_no_spec_is_a_one_line_error(self):
        # Each raised a traceback (UnicodeDecodeError, KeyError, TypeError) before.
        root = "name: m\nweights: m.safetensors\ninteraction: dot\ntop_mlp: [1]\n"
        binary = os.path.join(self.tmp, "m.safetensors")
        with open(binary, "wb") as f:
            f.write(b"\x80\x00\xff\xfe" * 64)
        cases = [
            (binary, "not a YAML text file (byte 0x80 at offset 0 is not UTF-8)"),
            (self.write("map.yaml", "server: {listen: x}\n"),
             "not a model spec (want a map with name:, weights:, interaction:, top_mlp: and "
             "tables:)"),
            (self.write("list.yaml", "[1, 2]\n"), "not a model spec"),
            (self.write("int.yaml", root + "tables: [5]\n"),
             "tables[0]: want a map like {name: user_id, side: user, rows: 1000, dim: 16}, "
             "got 5"),
            (self.write("tables.yaml", root + "tables: 5\n"), "tables: want a list of tables"),
            (self.write("side.yaml", root + "tables: [{name: u, rows: 3, dim: 4}]\n"),
             "tables[0].side: want user or item, got None"),
            (self.write("rows.yaml", root + "tables: [{name: u, side: user, rows: x, dim: 4}]\n"),
             "tables[0].rows: want a count >= 1, got 'x'"),
            (self.write("dense.yaml", root + "dense: 4\n"),
             "dense: want a map like {user: 4, item: 3}, got 4"),
            (self.write("dense_user.yaml", root + "dense: {user: -1}\n"),
             "dense.user: want a count >= 0, got -1"),
            (self.write("bad.yaml", "tables: [\n"), "invalid YAML at line 2"),
        ]
        for path, reason in cases:
            with self.subTest(file=os.path.basename(path)):
                done = self.run_client(RANK, "--model", path)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn(f"rank_client: error: --model {path}: {reason}", done.stderr)
                self.assertEqual(done.stderr.strip().count("\n"), 0, done.stderr)

    def test_a_redis_table_needs_remote_ids(self):
        spec_path = self.write("remote.yaml", (
            "name: r\nversion: '1'\nweights: r.safetensors\nembedding_dtype: fp32\n"
            "tables:\n  - {name: user_id, side: user, rows: 10, dim: 4}\n"
            "  - {name: item_id, side: item, dim: 4, storage: redis}\n"
            "dense: {user: 0, item: 0}\ninteraction: dot\ntop_mlp: [1]\n"))
        done = self.run_client(RANK, "--model", spec_path)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("table 'item_id' is storage: redis and has no rows in the spec: give "
                      "--remote-ids LO:HI", done.stderr)
        done = self.run_client(RANK, "--model", spec_path, "--remote-ids", "5:5")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("want LO:HI, int64 ids with LO < HI", done.stderr)
        # With a range, the request draws the redis table's ids from it.
        with open(spec_path) as f:
            spec = yaml.safe_load(f)
        ids = rank_client.table_ids(spec, (1000, 1010))
        self.assertEqual(ids, {"user_id": (0, 10), "item_id": (1000, 1010)})
        pb, _ = fuserank_client_common.load_stubs("clients_test", "ranker")
        request = rank_client.build_request(pb, spec, ids, 20, 0, random.Random(3))
        item_ids = {c.features[0].ids[0] for c in request.candidates}
        self.assertTrue(item_ids <= set(range(1000, 1010)), item_ids)
        self.assertTrue(all(0 <= f.ids[0] < 10 for f in request.user_features))


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(folder):
    """ca.pem, server.{pem,key} for localhost / 127.0.0.1 and client.{pem,key}."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=fuserank clients test CA", cwd=folder)
    for name, ext in (("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                 "extendedKeyUsage=serverAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(folder, f"{name}.ext"), "w") as f:
            f.write(ext)
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                 f"/CN={name}", cwd=folder)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile",
                 f"{name}.ext", cwd=folder)


class Server:
    """fuserank-server on loopback with TLS (mTLS when client_ca) and an admin token."""

    def __init__(self, folder, spec, certs, client_ca):
        self.port, self.admin_port = live.free_ports(2)
        token_file = os.path.join(folder, "admin.token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(token_file, 0o600)
        config = os.path.join(folder, "fuserank.yaml")
        ca = os.path.join(certs, "ca.pem") if client_ca else ""
        with open(config, "w") as f:
            f.write(f"server:\n  listen: 127.0.0.1:{self.port}\n"
                    f"  admin_listen: 127.0.0.1:{self.admin_port}\n"
                    f"  admin_token_file: {token_file}\n  metrics_listen: \"\"\n"
                    f"  shutdown_grace_seconds: 1\n"
                    f"  tls: {{cert_file: {certs}/server.pem, key_file: {certs}/server.key, "
                    f"client_ca_file: \"{ca}\"}}\n"
                    f"engine: {{device: cpu}}\nmodel: {{path: {spec}}}\n")
        self.process = live.Process("fuserank-server", [SERVER, "--config", config],
                                    os.path.join(folder, "server.log"), cwd=folder)

    def wait(self):
        """None once the admin port accepts a connection; else the server's log."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.process.running():
            try:
                socket.create_connection(("127.0.0.1", self.admin_port), timeout=1).close()
                return None
            except OSError:
                time.sleep(0.05)
        self.process.log.flush()
        return self.process.tail()

    def stop(self):
        self.process.stop(15)


@unittest.skipUnless(SERVER and os.path.exists(SERVER) and GEN_MODEL and
                     os.path.exists(GEN_MODEL) and
                     subprocess.run(["which", "openssl"], capture_output=True).returncode == 0,
                     "needs $FUSERANK_SERVER, $FUSERANK_GEN_MODEL and openssl")
class ClientTlsTest(ClientTestBase):
    def setUp(self):
        super().setUp()
        self.certs = os.path.join(self.tmp, "certs")
        os.makedirs(self.certs)
        make_certificates(self.certs)
        self.spec = os.path.join(self.tmp, "model", "m.yaml")
        subprocess.run([GEN_MODEL, f"--out={self.spec}", "--rows=50", "--dim=4",
                        "--top_mlp=4,1"], check=True, capture_output=True)
        self.system_roots = {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": f"{self.certs}/ca.pem"}

    def serve(self, client_ca):
        folder = tempfile.mkdtemp(dir=self.tmp)
        server = Server(folder, self.spec, self.certs, client_ca)
        self.addCleanup(server.stop)
        failure = server.wait()
        if failure is not None:
            self.fail(f"fuserank-server did not start:\n{failure}")
        return server

    def admin(self, server, *flags, env=None):
        token = self.write("token", TOKEN)
        return self.run_client(ADMIN, "--target", f"localhost:{server.admin_port}",
                               "--token-file", token, "--timeout", "10", *flags, "get", env=env)

    def rank(self, server, *flags, env=None):
        return self.run_client(RANK, "--target", f"localhost:{server.port}", "--model",
                               self.spec, "--timeout", "10", *flags, env=env)

    def test_tls_flags_mean_tls_and_no_flag_means_plaintext(self):
        server = self.serve(client_ca=False)
        ca = ["--ca", f"{self.certs}/ca.pem"]
        for call in (self.admin, self.rank):
            with self.subTest(client=call.__name__):
                done = call(server, *ca)
                self.assertEqual(done.returncode, 0, done.stderr)
                done = call(server, "--tls", env=self.system_roots)  # the system's roots
                self.assertEqual(done.returncode, 0, done.stderr)
                done = call(server)  # plaintext against TLS: refused
                self.assertEqual(done.returncode, 1, done.stdout)
                self.assertIn("UNAVAILABLE", done.stderr)
                done = call(server, "--tls")  # the real system roots do not know this CA
                self.assertEqual(done.returncode, 1, done.stdout)
                self.assertIn("UNAVAILABLE", done.stderr)
        self.assertIn('"model_version": "1"', self.rank(server, *ca).stdout)

    def test_client_certificate_without_ca_is_mtls_against_system_roots(self):
        server = self.serve(client_ca=True)
        mtls = ["--cert", f"{self.certs}/client.pem", "--key", f"{self.certs}/client.key"]
        for call in (self.admin, self.rank):
            with self.subTest(client=call.__name__):
                done = call(server, *mtls, env=self.system_roots)
                self.assertEqual(done.returncode, 0, done.stderr)
                done = call(server, "--ca", f"{self.certs}/ca.pem")  # no client certificate
                self.assertEqual(done.returncode, 1, done.stdout)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:  # a half not run must not read as passed
        for test, why in result.skipped:
            print(f"SKIPPED {test.id()}: {why}", file=sys.stderr)
        sys.exit(SKIP_EXIT_CODE)
