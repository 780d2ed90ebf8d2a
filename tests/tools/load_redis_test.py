#!/usr/bin/env python3
"""fuserank-load-redis against a real 3-master Redis Cluster on loopback: rows of a
safetensors tensor under given keys (and under their row index), a key-value dump stored as
fp16, an int8 table (from safetensors with its qparams, and from a dump) as codes followed by
the row's scale and bias, idempotent reruns, and bad input refused naming the file and line
before anything is written (fp16/bf16 overflow, a --dtype unlike the tensor's, a bad key;
tabs separate fields too), rows sent in batches. Each value is read back with
`redis-cli -c --raw GET` and compared byte for byte with the rows written.
Exit 77 (skipped) when redis-server / redis-cli are not installed (scripts/install-deps.sh
installs them) or the tool was not built."""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

TOOL = os.environ.get("FUSERANK_LOAD_REDIS", "")


def free_port():
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
                return port
            except OSError:
                continue


def write_safetensors(path, name, array, dtype):
    data = array.tobytes()
    header = json.dumps({name: {"dtype": dtype, "shape": list(array.shape),
                                "data_offsets": [0, len(data)]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


def write_safetensors_many(path, tensors):
    """tensors: [(name, array, dtype)], written one after another."""
    header, data = {}, b""
    for name, array, dtype in tensors:
        raw = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


class LoadRedisTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="fuserank-load-redis-")
        cls.procs = []
        cls.ports = []
        for i in range(3):
            port = free_port()
            node_dir = os.path.join(cls.dir, f"node{i}")
            os.makedirs(node_dir)
            cls.procs.append(subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                 "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                 "--dir", node_dir, "--save", "", "--appendonly", "no",
                 "--logfile", os.path.join(node_dir, "redis.log")]))
            cls.ports.append(port)
        for port in cls.ports:
            for _ in range(200):
                if cls.cli(port, "ping").strip() == b"PONG":
                    break
                time.sleep(0.025)
        subprocess.run(["redis-cli", "--cluster", "create"] +
                       [f"127.0.0.1:{p}" for p in cls.ports] + ["--cluster-yes"],
                       check=True, capture_output=True)
        deadline = time.time() + 20
        while time.time() < deadline:
            if all(b"cluster_state:ok" in cls.cli(p, "cluster", "info") for p in cls.ports):
                break
            time.sleep(0.1)
        cls.seeds = ",".join(f"127.0.0.1:{p}" for p in cls.ports)

    @classmethod
    def tearDownClass(cls):
        for proc in cls.procs:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @staticmethod
    def cli(port, *args):
        return subprocess.run(["redis-cli", "-c", "-p", str(port), "--raw"] + list(args),
                              capture_output=True).stdout

    def get(self, key):
        out = self.cli(self.ports[0], "GET", key)
        return out[:-1]  # --raw adds one newline

    def load(self, *args):
        return subprocess.run([TOOL, f"--seed_nodes={self.seeds}"] + list(args),
                              capture_output=True, text=True)

    def test_a_tensor_under_its_keys_and_again_idempotently(self):
        rng = np.random.default_rng(7)
        table = rng.standard_normal((40, 8)).astype(np.float32)
        path = os.path.join(self.dir, "t.safetensors")
        write_safetensors(path, "embeddings.item_id.weight", table, "F32")
        keys = [int(k) for k in rng.integers(-2**62, 2**62, size=40)]
        key_file = os.path.join(self.dir, "keys.txt")
        with open(key_file, "w") as f:
            f.write("\n".join(str(k) for k in keys) + "\n")
        for _ in range(2):  # a second run writes the same bytes
            done = self.load("--table=item_id", f"--safetensors={path}", f"--keys={key_file}")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("table item_id: 40 rows written (1280 bytes), 0 failed", done.stdout)
            self.assertIn("40/40 rows", done.stderr)
            for row, key in enumerate(keys):
                self.assertEqual(self.get(f"fuserank:item_id:{key}"), table[row].tobytes(), key)

    def test_the_row_index_is_the_key_by_default(self):
        table = np.arange(12, dtype=np.float32).reshape(3, 4) / 8
        path = os.path.join(self.dir, "u.safetensors")
        write_safetensors(path, "embeddings.user_id.weight", table.astype(np.float16), "F16")
        done = self.load("--table=user_id", f"--safetensors={path}", "--key_prefix=p:")
        self.assertEqual(done.returncode, 0, done.stderr)
        for row in range(3):
            self.assertEqual(self.get(f"p:user_id:{row}"), table[row].astype(np.float16).tobytes())

    def test_a_key_value_dump_as_fp16(self):
        dump = os.path.join(self.dir, "rows.txt")
        rows = {5: [0.5, -1.25, 2.0], -9: [0.0, 3.5, -0.125]}
        with open(dump, "w") as f:
            for key, values in rows.items():
                f.write(f"{key} " + " ".join(str(v) for v in values) + "\n")
        done = self.load("--table=ad_id", f"--dump={dump}", "--dtype=fp16")
        self.assertEqual(done.returncode, 0, done.stderr)
        for key, values in rows.items():
            self.assertEqual(self.get(f"fuserank:ad_id:{key}"),
                             np.array(values, dtype=np.float16).tobytes())

    def test_an_int8_table_carries_its_qparams(self):
        rng = np.random.default_rng(3)
        codes = rng.integers(-128, 128, size=(6, 5)).astype(np.int8)
        qparams = rng.standard_normal((6, 2)).astype(np.float32)
        path = os.path.join(self.dir, "q.safetensors")
        write_safetensors_many(path, [("embeddings.q_id.weight", codes, "I8"),
                                      ("embeddings.q_id.qparams", qparams, "F32")])
        done = self.load("--table=q_id", f"--safetensors={path}")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("table q_id: 6 rows written (78 bytes), 0 failed", done.stdout)
        for row in range(6):
            self.assertEqual(self.get(f"fuserank:q_id:{row}"),
                             codes[row].tobytes() + qparams[row].tobytes())
        # Without its qparams tensor an I8 tensor is refused, naming the one missing.
        bare = os.path.join(self.dir, "q_bare.safetensors")
        write_safetensors(bare, "embeddings.q_id.weight", codes, "I8")
        done = self.load("--table=q_id", f"--safetensors={bare}")
        self.assertEqual(done.returncode, 2)
        self.assertIn("embeddings.q_id.qparams", done.stderr)
        # A dump: "<id> <scale> <bias> <q_1> ... <q_dim>".
        dump = os.path.join(self.dir, "q.txt")
        with open(dump, "w") as f:
            f.write("77 0.5 -1.25 -128 0 127\n-3 0.125 2 1 2 3\n")
        done = self.load("--table=q_id", f"--dump={dump}", "--dtype=int8")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.get("fuserank:q_id:77"),
                         np.array([-128, 0, 127], np.int8).tobytes() +
                         np.array([0.5, -1.25], np.float32).tobytes())
        self.assertEqual(self.get("fuserank:q_id:-3"),
                         np.array([1, 2, 3], np.int8).tobytes() +
                         np.array([0.125, 2], np.float32).tobytes())
        with open(dump, "w") as f:
            f.write("1 0.5 0 1 2\n2 0.5 0 1 300\n")
        done = self.load("--table=q_id", f"--dump={dump}", "--dtype=int8")
        self.assertEqual(done.returncode, 2)
        self.assertIn(f"{dump}:2: code 2 is not an integer in -128..127", done.stderr)

    def test_bad_input_is_refused_naming_file_and_line(self):
        dump = os.path.join(self.dir, "bad.txt")
        with open(dump, "w") as f:
            f.write("1 0.5 0.5\n2 0.5\n")
        done = self.load("--table=ad_id", f"--dump={dump}")
        self.assertEqual(done.returncode, 2)
        self.assertIn(f"{dump}:2: 1 values, want 2", done.stderr)
        done = self.load("--table=nope", f"--safetensors={os.path.join(self.dir, 'missing')}")
        self.assertEqual(done.returncode, 2)

    def test_fp16_and_bf16_values_out_of_range_are_refused(self):
        dump = os.path.join(self.dir, "wide.txt")
        for dtype, big in (("fp16", "70000"), ("bf16", "3.4e38")):
            with open(dump, "w") as f:
                f.write(f"31 0.5 1\n32 1 {big}\n")
            done = self.load("--table=wide", f"--dump={dump}", f"--dtype={dtype}")
            self.assertEqual(done.returncode, 2, done.stdout)
            self.assertIn(f"{dump}:2: value 2 ({big}) overflows {dtype}", done.stderr)
            self.assertEqual(self.get("fuserank:wide:31"), b"", "nothing is written")
        # 65519 rounds to 65504, fp16's largest finite value: stored.
        with open(dump, "w") as f:
            f.write("33 65519 -65519\n")
        done = self.load("--table=wide", f"--dump={dump}", "--dtype=fp16")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.get("fuserank:wide:33"),
                         np.array([65504, -65504], dtype=np.float16).tobytes())

    def test_dtype_is_checked_against_the_tensor(self):
        table = np.arange(6, dtype=np.float32).reshape(3, 2)
        path = os.path.join(self.dir, "d.safetensors")
        write_safetensors(path, "embeddings.d_id.weight", table, "F32")
        done = self.load("--table=d_id", f"--safetensors={path}", "--dtype=bogus")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--dtype: fp32, fp16, bf16 or int8, got 'bogus'", done.stderr)
        done = self.load("--table=d_id", f"--safetensors={path}", "--dtype=fp16")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--dtype=fp16: embeddings.d_id.weight is F32, which only a model with "
                      "embedding_dtype fp32 reads", done.stderr)
        self.assertEqual(self.get("fuserank:d_id:0"), b"", "nothing is written")
        done = self.load("--table=d_id", f"--safetensors={path}", "--dtype=fp32")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.get("fuserank:d_id:2"), table[2].tobytes())

    def test_tabs_separate_dump_fields_and_a_bad_key_says_what_is_expected(self):
        dump = os.path.join(self.dir, "tabs.txt")
        with open(dump, "w") as f:
            f.write("41\t0.5\t-2\r\n42 \t 1.5\t0.25\n")
        done = self.load("--table=tab_id", f"--dump={dump}")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.get("fuserank:tab_id:41"), np.array([0.5, -2], np.float32).tobytes())
        self.assertEqual(self.get("fuserank:tab_id:42"),
                         np.array([1.5, 0.25], np.float32).tobytes())
        with open(dump, "w") as f:
            f.write("43,0.5,1\n")
        done = self.load("--table=tab_id", f"--dump={dump}")
        self.assertEqual(done.returncode, 2)
        self.assertIn(f"{dump}:1: bad key '43,0.5,1': want an int64 id, then the values, "
                      "separated by spaces or tabs", done.stderr)

    def test_rows_go_out_in_batches_after_the_whole_dump_is_checked(self):
        dump = os.path.join(self.dir, "many.txt")
        rows = {k: [k / 4, -k / 8] for k in range(100, 110)}
        with open(dump, "w") as f:
            f.write("\n".join(f"{k} {a} {b}" for k, (a, b) in rows.items()) + "\n")
        done = self.load("--table=many", f"--dump={dump}", "--batch=3")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("3/10 rows", done.stderr)
        self.assertIn("10/10 rows", done.stderr)
        for k, values in rows.items():
            self.assertEqual(self.get(f"fuserank:many:{k}"),
                             np.array(values, np.float32).tobytes())
        # A bad last line: the first batches are not written either.
        with open(dump, "w") as f:
            f.write("\n".join(f"{k + 100} {a} {b}" for k, (a, b) in rows.items()) + "\nx\n")
        done = self.load("--table=many", f"--dump={dump}", "--batch=3")
        self.assertEqual(done.returncode, 2)
        self.assertIn(f"{dump}:11: bad key 'x'", done.stderr)
        self.assertEqual(self.get("fuserank:many:200"), b"")

    def test_a_dump_read_once_from_stdin_or_a_fifo_is_written_whole(self):
        rows = {k: [k / 2, -k / 4] for k in range(300, 307)}
        text = "".join(f"{k} {a} {b}\n" for k, (a, b) in rows.items())
        done = subprocess.run([TOOL, f"--seed_nodes={self.seeds}", "--table=piped",
                               "--dump=/dev/stdin", "--batch=3"],
                              input=text, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("7 rows written", done.stdout)
        self.assertIn("3/7 rows", done.stderr)  # --batch holds for rows kept from the check
        for k, values in rows.items():
            self.assertEqual(self.get(f"fuserank:piped:{k}"),
                             np.array(values, np.float32).tobytes())
        # A FIFO gives its content to one open only: the rows come from the check's read.
        fifo = os.path.join(self.dir, "rows.fifo")
        os.mkfifo(fifo)
        writer = threading.Thread(target=lambda: open(fifo, "w").write(text.replace(
            "30", "40")))
        writer.start()
        done = subprocess.run([TOOL, f"--seed_nodes={self.seeds}", "--table=fifo",
                               f"--dump={fifo}", "--batch=3"],
                              capture_output=True, text=True, timeout=60)
        writer.join(timeout=5)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("7 rows written", done.stdout)
        self.assertEqual(self.get("fuserank:fifo:406"),
                         np.array(rows[306], np.float32).tobytes())


if __name__ == "__main__":
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        print("skipped: redis-server / redis-cli not installed (scripts/install-deps.sh)")
        sys.exit(77)
    if not TOOL or not os.path.exists(TOOL):
        print("skipped: fuserank-load-redis not built")
        sys.exit(77)
    unittest.main()
