#!/usr/bin/env python3
"""The command lines of the C++ tools, where no server or cluster is needed: --help lists
each tool's flags and exits 0 (it printed "No flags matched." and exited 1), an argument
that is no flag is refused (exit 2), and what each tool refuses before it does anything:
fuserank-kserve-data and fuserank-bench (a NaN or infinite --zipf hung them; a huge
--candidates or --bag ended in std::bad_alloc; --out naming the model; --top_k=-1; a write
that fails leaves no partial file), fuserank-load-redis (a folder or an empty dump loaded
"0 rows"; an id given twice was loaded last-wins; --batch, --timeout_ms, --seed_nodes
taken as they came), fuserank-score-compare (--requests=0 passed, comparing nothing).

The binaries come from the environment (ctest passes the built targets): FUSERANK_GEN_MODEL,
FUSERANK_LOAD_REDIS, FUSERANK_KSERVE_DATA, FUSERANK_BENCH and FUSERANK_SCORE_COMPARE; exit
77 (skipped) when one is missing, or when a case skipped (unittest_main).
fuserank-gpu-bench, built only with CUDA, has its own suite: gpu_bench_cli_test.py.
"""
import json
import os
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
from unittest_main import SKIP_EXIT_CODE, run_tests  # noqa: E402

TOOLS = {name: os.environ.get(var, "") for name, var in (
    ("gen-model", "FUSERANK_GEN_MODEL"), ("load-redis", "FUSERANK_LOAD_REDIS"),
    ("kserve-data", "FUSERANK_KSERVE_DATA"), ("bench", "FUSERANK_BENCH"),
    ("score-compare", "FUSERANK_SCORE_COMPARE"))}
# A flag of each tool that --help must list.
A_FLAG = {"gen-model": "--max_weights_bytes", "load-redis": "--seed_nodes",
          "kserve-data": "--requests_pool", "bench": "--concurrency",
          "score-compare": "--reference"}


def run(tool, *args, timeout=60, preexec_fn=None):
    # Without LD_PRELOAD: a sanitizer runtime preloaded into ctest is not for these.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return subprocess.run([TOOLS.get(tool, tool), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=preexec_fn)


def limited_file_size(limit):
    """A preexec_fn: the child's files may not grow past `limit` bytes (the write fails
    with EFBIG, "File too large", rather than SIGXFSZ ending the child)."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="fuserank_cli_test_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp, name)

    def model(self):
        """A small model (2 user and 3 item dense features), as the audit's."""
        spec = self.path("m/m.yaml")
        done = run("gen-model", f"--out={spec}", "--dense_user=2", "--dense_item=3",
                   "--bottom_mlp=16")
        self.assertEqual(done.returncode, 0, done.stderr)
        return spec

    def assert_refused(self, done, message, code=2):
        self.assertEqual(done.returncode, code, f"stdout {done.stdout!r} stderr {done.stderr!r}")
        self.assertIn(message, done.stderr)


class HelpAndArgumentsTest(TempDirTest):
    def test_help_lists_the_tools_flags_and_exits_0(self):
        for tool in TOOLS:
            with self.subTest(tool=tool):
                done = run(tool, "--help")
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertNotIn("No flags matched", done.stdout)
                self.assertIn(f"fuserank-{tool}:", done.stdout)
                self.assertIn(f"    {A_FLAG[tool]} (", done.stdout)

    def test_an_argument_that_is_no_flag_is_refused(self):
        for tool in TOOLS:
            with self.subTest(tool=tool):
                self.assert_refused(run(tool, "extra"), f"fuserank-{tool}: unexpected argument "
                                    "'extra' (flags are --name=value; see --help)")


class RequestFlagsTest(TempDirTest):
    """fuserank-kserve-data and fuserank-bench build the same request pool: the same
    refusals, before any file is written or any connection made."""

    def test_a_nan_or_infinite_zipf_is_refused_not_a_hang(self):
        spec = self.model()
        for tool in ("kserve-data", "bench"):
            for value in ("nan", "inf", "-inf", "-1"):
                with self.subTest(tool=tool, zipf=value):
                    done = run(tool, f"--model={spec}", f"--out={self.path('d.json')}"
                               if tool == "kserve-data" else "--target=127.0.0.1:1",
                               f"--zipf={value}", timeout=30)
                    self.assert_refused(done, "--zipf: want a finite number >= 0")

    def test_candidates_and_bag_are_bounded(self):
        spec = self.model()
        cases = [("--candidates=2000000", "--candidates: want 0..1048576 (the largest "
                  "server.max_candidates), got 2000000"),
                 ("--bag=99999999", "--bag: want 1..1048576 (the largest "
                  "server.max_ids_per_feature), got 99999999"),
                 ("--candidates=1048576 --bag=1048576", "would take about")]
        for tool in ("kserve-data", "bench"):
            for flags, message in cases:
                with self.subTest(tool=tool, flags=flags):
                    other = (f"--out={self.path('d.json')}" if tool == "kserve-data"
                             else "--target=127.0.0.1:1")
                    done = run(tool, f"--model={spec}", other, *flags.split(), timeout=30)
                    self.assert_refused(done, message)
        self.assertFalse(os.path.exists(self.path("d.json")))


class KserveDataTest(TempDirTest):
    def test_out_may_not_be_the_model(self):
        spec = self.model()
        with open(spec, "rb") as f:
            before = f.read()
        weights = self.path("m/m.safetensors")
        for out, what in ((spec, "spec"), (self.path("m/../m/m.yaml"), "spec"),
                          (weights, "weights")):
            with self.subTest(out=out):
                done = run("kserve-data", f"--model={spec}", f"--out={out}")
                self.assert_refused(done, f"--out={out} is the model's {what} (--model)")
        with open(spec, "rb") as f:
            self.assertEqual(f.read(), before)
        self.assert_refused(run("kserve-data", f"--model={spec}", f"--out={self.tmp}"),
                            f"--out: {self.tmp}: is a directory, not a file")

    def test_top_k_is_not_negative_and_its_help_says_it_is_not_in_the_file(self):
        spec = self.model()
        self.assert_refused(run("kserve-data", f"--model={spec}", f"--out={self.path('d.json')}",
                                "--top_k=-1"), "--top_k: want >= 0 (0: all), got -1")
        help_text = " ".join(run("kserve-data", "--help").stdout.split())
        self.assertIn("NOT written to the file (perf_analyzer's input data holds tensors only); "
                      "give perf_analyzer the same value, --request-parameter top_k:N:int",
                      help_text)

    def test_a_failed_write_leaves_no_file_and_says_why(self):
        spec = self.model()
        out = self.path("d.json")
        done = run("kserve-data", f"--model={spec}", f"--out={out}",
                   preexec_fn=limited_file_size(4096))
        self.assert_refused(done, "write failed: File too large", code=1)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["m"])
        # Over an older file: the old one stays whole.
        with open(out, "w") as f:
            f.write("old")
        done = run("kserve-data", f"--model={spec}", f"--out={out}",
                   preexec_fn=limited_file_size(4096))
        self.assertEqual(done.returncode, 1, done.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "old")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["d.json", "m"])
        # Without the limit it is replaced by the whole file.
        done = run("kserve-data", f"--model={spec}", f"--out={out}", "--requests_pool=3")
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(out) as f:
            self.assertEqual(len(json.load(f)["data"]), 3)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["d.json", "m"])


class ScoreCompareTest(TempDirTest):
    def test_a_run_that_compares_nothing_is_refused(self):
        spec = self.model()
        for flag in ("--requests=0", "--tolerance=nan", "--timeout_ms=0"):
            with self.subTest(flag=flag):
                self.assert_refused(run("score-compare", f"--model={spec}",
                                        "--reference=127.0.0.1:1", flag),
                                    "want --requests >= 1, a finite --tolerance >= 0")


def write_safetensors(path, name, data, shape, dtype):
    header = json.dumps({name: {"dtype": dtype, "shape": shape,
                                "data_offsets": [0, len(data)]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


class LoadRedisInputTest(TempDirTest):
    """Refused before any connection: the seed node 127.0.0.1:1 is never dialled."""

    def load(self, *args, seeds="127.0.0.1:1"):
        return run("load-redis", f"--seed_nodes={seeds}", "--table=t", *args)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def test_a_dump_without_rows_is_refused_naming_it(self):
        empty = self.write("empty.txt", "")
        blank = self.write("blank.txt", "\n \n")
        os.mkdir(self.path("folder"))
        self.assert_refused(self.load(f"--dump={empty}"), f"{empty}: no rows")
        self.assert_refused(self.load(f"--dump={blank}"), f"{blank}: no rows")
        self.assert_refused(self.load(f"--dump={self.path('folder')}"),
                            f"{self.path('folder')}: is a directory, not a file")
        self.assert_refused(self.load(f"--dump={self.path('none.txt')}"),
                            f"{self.path('none.txt')}: cannot open: No such file or directory")

    def test_an_id_given_twice_is_refused_naming_both_lines(self):
        dump = self.write("dup.txt", "1 0.5 1\n\n2 1 2\n1 3 4\n")
        self.assert_refused(self.load(f"--dump={dump}"),
                            f"{dump}:4: id 1 again (first on line 1): one row per id")
        # Read once from a pipe: the same lines.
        done = subprocess.run([TOOLS["load-redis"], "--seed_nodes=127.0.0.1:1", "--table=t",
                               "--dump=/dev/stdin"], input="7 1\n8 2\n\n\n7 3\n",
                              capture_output=True, text=True, timeout=60)
        self.assert_refused(done, "/dev/stdin:5: id 7 again (first on line 1)")
        # --keys: a key twice.
        tensor = self.path("t.safetensors")
        write_safetensors(tensor, "embeddings.t.weight", struct.pack("<6f", *range(6)), [3, 2],
                          "F32")
        keys = self.write("keys.txt", "10\n11\n10\n")
        self.assert_refused(self.load(f"--safetensors={tensor}", f"--keys={keys}"),
                            f"{keys}:3: key 10 again (first on line 1)")

    def test_flags_out_of_range_are_refused(self):
        dump = self.write("rows.txt", "1 0.5\n")
        cases = [(["--batch=0"], "--batch: want 1..1048576 rows a round, got 0"),
                 (["--batch=-3"], "--batch: want 1..1048576 rows a round, got -3"),
                 (["--timeout_ms=0"], "--timeout_ms: want >= 1, got 0"),
                 (["--keys=k.txt"], "--keys applies to --safetensors"),
                 (["--tensor=x"], "--tensor applies to --safetensors"),
                 (["--qparams=x"], "--qparams applies to --safetensors")]
        for flags, message in cases:
            with self.subTest(flags=flags):
                self.assert_refused(self.load(f"--dump={dump}", *flags), message)
        for seeds in ("garbage", "127.0.0.1:99999", "127.0.0.1:1,:7000"):
            with self.subTest(seeds=seeds):
                bad = seeds.split(",")[-1]
                self.assert_refused(self.load(f"--dump={dump}", seeds=seeds),
                                    f"--seed_nodes: '{bad}' is not HOST:PORT")


if __name__ == "__main__":
    missing = [name for name, path in TOOLS.items() if not path or not os.path.exists(path)]
    if missing:
        print(f"skipped: not built: {', '.join('fuserank-' + m for m in missing)}")
        sys.exit(SKIP_EXIT_CODE)
    run_tests()
