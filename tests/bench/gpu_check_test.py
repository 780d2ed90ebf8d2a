#!/usr/bin/env python3
"""The GPU check's own rules, tested on the CPU (bench/gpu/summarize.py, suites.py,
run_tests.sh, server_e2e.sh).

  verdicts    recorded runs (testdata/gpu_check, see record.sh there): all-pass -> PASS;
              all-skip, a crash (no XML), a partial failure, memcheck errors, racecheck
              hazards -> FAIL; the exit status matches the last line.
  partition   every test of this build's gpu_tests is in exactly one suite.
  no GPU      run_tests.sh on this machine (no GPU) with this build as the bundle must FAIL:
              on a GPU run a GPU test that would skip is a failure.
  server      (with --server-e2e) server_e2e.sh with E2E_DEVICE=cpu E2E_QUICK=1: every
              comparison within 2e-6 (here: the same engine, so 0), the /metrics check ok;
              server_sweep.sh and server_reload.sh in their quick modes (stage means read,
              reloads seen, no failed request) and the summary's reload verdict.
usage: gpu_check_test.py BIN_DIR [--server-e2e]
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU = os.path.join(ROOT, "bench", "gpu")
FIXTURES = os.path.join(ROOT, "tests", "bench", "testdata", "gpu_check")
BIN = ""
BUNDLED = ["gpu_tests", "fuserank-gpu-bench", "fuserank-server", "fuserank-bench",
           "fuserank-gen-model", "fuserank-score-compare"]


def summarize(mode, out):
    p = subprocess.run([sys.executable, os.path.join(GPU, "summarize.py"), mode, out],
                       capture_output=True, text=True)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    return p.returncode, last, p.stdout + p.stderr


def has_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        return False


class Verdicts(unittest.TestCase):
    def check(self, fixture, passed, words=()):
        rc, last, text = summarize("tests", os.path.join(FIXTURES, fixture))
        self.assertTrue(last.startswith("gpu-check: PASS" if passed else "gpu-check: FAIL"), text)
        self.assertEqual(rc, 0 if passed else 1, text)
        for w in words:
            self.assertIn(w, last)

    def test_all_pass_passes(self):
        self.check("all_pass", True, ["memcheck: not run (tool missing)",
                                      "racecheck: not run (tool missing)"])

    def test_all_skip_fails(self):
        self.check("all_skip", False, ["skipped"])

    def test_a_crash_without_a_report_fails(self):
        self.check("crash", False, ["pipeline: no XML report"])

    def test_a_partial_failure_fails(self):
        self.check("partial_fail", False, ["lookup: 3 failed"])

    def test_memcheck_errors_fail(self):
        self.check("memcheck_errors", False, ["memcheck: 3 errors"])

    def test_racecheck_hazards_fail(self):
        self.check("racecheck_hazards", False, ["racecheck: 2 hazards"])

    def test_a_racecheck_warning_is_a_hazard(self):
        sys.path.insert(0, GPU)
        import summarize
        clean = "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
        warned = "========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n"
        self.assertEqual(summarize.sanitizer_findings("racecheck", clean), 0)
        self.assertEqual(summarize.sanitizer_findings("racecheck", warned), 1)
        self.assertIsNone(summarize.sanitizer_findings("racecheck", "no summary\n"))
        self.assertEqual(summarize.sanitizer_findings("memcheck", "ERROR SUMMARY: 1 error\n"), 1)

    def test_a_graph_update_refusal_is_named_apart_from_the_pipeline(self):
        with tempfile.TemporaryDirectory() as out:
            shutil.copytree(os.path.join(FIXTURES, "all_pass"), out, dirs_exist_ok=True)
            report = os.path.join(out, "xml", "graph_update.xml")
            text = open(report).read().replace(
                'classname="CudaGraphUpdateTest" />',
                'classname="CudaGraphUpdateTest"><failure message="cudaGraphExecUpdate refused '
                'to re-point the graph" type="" /></testcase>')
            open(report, "w").write(text)
            rc, last, output = summarize("tests", out)
            self.assertEqual(rc, 1, output)
            self.assertIn("graph_update: 1 failed", last)
            self.assertNotIn("pipeline:", last)

    def test_a_missing_run_fails(self):
        with tempfile.TemporaryDirectory() as out:
            self.check_empty(out)

    def check_empty(self, out):
        rc, last, text = summarize("tests", out)
        self.assertEqual(rc, 1, text)
        self.assertTrue(last.startswith("gpu-check: FAIL"), text)


def binary(name):
    path = os.path.join(BIN, name)
    return path if os.path.exists(path) else None


class ThisBuild(unittest.TestCase):
    def test_the_suites_partition_gpu_tests(self):
        gpu_tests = binary("gpu_tests")
        if gpu_tests is None:
            self.skipTest("no gpu_tests in this build (CUDA off)")
        listing = subprocess.run([gpu_tests, "--gtest_list_tests"], capture_output=True,
                                 text=True, check=True).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(listing)
            f.flush()
            p = subprocess.run([sys.executable, os.path.join(GPU, "suites.py"), "check", f.name],
                               capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_a_run_without_a_gpu_fails(self):
        if any(binary(b) is None for b in BUNDLED):
            self.skipTest("this build lacks some bundled binaries (CUDA off)")
        if has_gpu():
            self.skipTest("this machine has a GPU")
        with tempfile.TemporaryDirectory() as tmp:
            bundle, out = os.path.join(tmp, "bundle"), os.path.join(tmp, "out")
            os.makedirs(os.path.join(bundle, "bin"))
            os.makedirs(os.path.join(bundle, "lib"))
            for b in BUNDLED:
                os.symlink(os.path.join(BIN, b), os.path.join(bundle, "bin", b))
            module = os.path.join(os.path.dirname(BIN), "lib", "libfuserank_cuda.so")
            os.symlink(module, os.path.join(bundle, "lib", "libfuserank_cuda.so"))
            open(os.path.join(bundle, "MANIFEST"), "w").write("this build\n")
            env = dict(os.environ, BUNDLE=bundle, OUT=out)
            p = subprocess.run(["bash", os.path.join(GPU, "run_tests.sh")], env=env,
                               capture_output=True, text=True, timeout=120)
            last = p.stdout.strip().splitlines()[-1]
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertTrue(last.startswith("gpu-check: FAIL (smoke:"), last)
            self.assertIn("FUSERANK_REQUIRE_GPU=1 but no CUDA device", last)


class ServerEndToEnd(unittest.TestCase):
    def test_the_server_check_on_the_cpu(self):
        rows = run_quick(self, "server_e2e.sh", "E2E_QUICK", 0,
                         extra_binaries=("fuserank-score-compare",), timeout=240)
        compares = [r for r in rows if r["bench"] == "compare"]
        self.assertEqual(len(compares), 5, rows)
        for r in compares:
            self.assertEqual(r["requests"], 200, r)
            self.assertEqual(r["errors"], 0, r)
            self.assertEqual(r["max_abs_diff"], 0, r)  # the same engine on both sides
            self.assertEqual(r["order_mismatches"], 0, r)
        metrics = [r for r in rows if r["bench"] == "metrics"]
        self.assertEqual(len(metrics), 1, rows)
        self.assertTrue(metrics[0]["ok"], metrics[0])
        loads = [r for r in rows if r["bench"] == "load"]
        self.assertTrue(loads and loads[0]["errors"] == 0 and loads[0]["qps"] > 0, loads)

    def test_the_settings_sweep_on_the_cpu(self):
        rows = run_quick(self, "server_sweep.sh", "SWEEP_QUICK", 2)
        self.assertEqual([r["setting"] for r in rows], ["default", "wait 50"], rows)
        for r in rows:
            self.assertEqual(r["errors"], 0, r)
            self.assertGreater(r["qps"], 0, r)
            # the server's own view of the calls the load sent, stage by stage
            for key in ("request_us", "decode_us", "queue_us", "dnn_us", "encode_us",
                        "batch_requests"):
                self.assertGreater(r.get(key, 0), 0, (key, r))
        summary = subprocess.run(
            [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import summarize;"
             " import json; summarize.print_sweep([json.loads(l) for l in sys.stdin])", GPU],
            input="\n".join(json.dumps(r) for r in rows), capture_output=True, text=True)
        self.assertEqual(summary.returncode, 0, summary.stderr)
        self.assertIn("wait 50", summary.stdout)


class ReloadUnderLoad(unittest.TestCase):
    def test_the_reload_check_on_the_cpu(self):
        rows = run_quick(self, "server_reload.sh", "RELOAD_QUICK", 1)
        self.assertEqual([r.get("window") for r in rows[:-1]], ["steady", "swap"], rows)
        self.assertEqual(rows[0]["reloads"], 0, rows)  # nothing changes in a steady window
        self.assertGreater(rows[1]["reloads"], 0, rows)  # the watch loaded new versions
        summary = rows[-1]
        self.assertEqual(summary["bench"], "reload_summary", summary)
        self.assertEqual(summary["errors"], 0, summary)
        self.assertEqual(summary["server_errors_logged"], 0, summary)
        # The summary's verdict: clean here; failed requests or a swap window without a
        # reload fail it.
        sys.path.insert(0, GPU)
        import summarize
        self.assertEqual(summarize.print_reload(rows), [])
        failed = rows[:-1] + [dict(summary, errors=3)]
        self.assertEqual(summarize.print_reload(failed), ["reload: 3 failed requests"])
        idle = [rows[0], dict(rows[1], reloads=0), summary]
        self.assertEqual(summarize.print_reload(idle), ["reload: a swap window saw no reload"])


class HostTablesCheck(unittest.TestCase):
    """The placement: host server's check: hits read from /metrics, and the verdict."""

    def test_hits_come_from_the_cache_series_and_none_fails_the_check(self):
        sys.path.insert(0, GPU)
        import e2e_report
        import summarize
        text = "\n".join([
            "# TYPE fuserank_embedding_cache_lookups_total counter",
            'fuserank_embedding_cache_lookups_total{result="hit",table="item_0"} 30',
            'fuserank_embedding_cache_lookups_total{result="miss",table="item_0"} 60',
            'fuserank_embedding_cache_lookups_total{result="hit",table="user_0"} 10',
            'fuserank_embedding_cache_lookups_total{result="miss",table="user_0"} 0',
        ])
        row = e2e_report.hot_cache_row(text)
        self.assertTrue(row["ok"], row)
        self.assertEqual((row["hits"], row["misses"]), (40, 60))
        self.assertAlmostEqual(row["hit_rate"], 0.4)
        self.assertEqual(summarize.print_hot_cache([row]), [])
        cold = e2e_report.hot_cache_row(text.replace("} 30", "} 0").replace("} 10", "} 0"))
        self.assertFalse(cold["ok"], cold)
        self.assertEqual(summarize.print_hot_cache([cold]),
                         ["hot_cache: no lookup was served from the device cache"])


class BenchTables(unittest.TestCase):
    def test_the_batch_table_keeps_the_autotune_apart(self):
        sys.path.insert(0, GPU)
        import contextlib
        import io
        import summarize

        def batch(autotune, us):
            return {"bench": "batch", "candidates": 256, "graphs": 1, "reorder": 0,
                    "stage_events": 1, "autotune": autotune, "device_us": us, "launches": 1}
        rows = [batch(1, 97.5), batch(0, 121.5),
                {"bench": "mlp_algo", "plan": "top", "layer": 0, "in": 383, "out": 256,
                 "rows": 256, "index": 3, "ran": 6, "first_us": 12.5, "chosen_us": 6.5},
                {"bench": "mlp_algo", "plan": "bottom", "layer": 1, "in": 64, "out": 32,
                 "rows": 16, "index": 0, "ran": 1, "first_us": 0, "chosen_us": 0}]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            summarize.print_kernel_tables(rows, [])
        line = [l for l in out.getvalue().splitlines() if l.startswith("  256")][0]
        self.assertIn("97.5", line)   # the autotuned graphs
        self.assertIn("121.5", line)  # the heuristic's algorithms, in their own column
        self.assertIn("top layer 0 (383 -> 256)   256 rows: kept proposal 3 (0: the heuristic's "
                      "first), 6 ran, 12.5 -> 6.5", out.getvalue())
        self.assertIn("bottom layer 1 (64 -> 32)    16 rows: kept proposal 0 (0: the heuristic's "
                      "first), 1 ran, not timed", out.getvalue())

    def test_a_staging_variant_with_other_values_fails_the_bench(self):
        sys.path.insert(0, GPU)
        import contextlib
        import io
        import summarize

        def row(variant, same):
            return {"bench": "smem_staging", "zipf": 1.05, "candidates": 1024, "variant": variant,
                    "staged": 64, "blocks": 0, "hit_rate": 0.31, "us": 12.0, "plain_us": 10.0,
                    "same_bits": same}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            failures = summarize.print_smem_staging(
                [row("staged, a group per bag", 1), row("staged, blocks = SM slots", 0)])
        self.assertEqual(len(failures), 1)
        self.assertIn("blocks = SM slots", failures[0])
        self.assertIn("  1.20  same", out.getvalue())
        self.assertIn("DIFF", out.getvalue())
        # The weighted multi-id check fails the bench on its own, timed rows or not.
        check = {"bench": "smem_staging_check", "variant": "staged, a block per SM", "staged": 16,
                 "same_bits": 0}
        with contextlib.redirect_stdout(io.StringIO()) as text:
            failures = summarize.print_smem_staging([dict(check, same_bits=1), check])
        self.assertEqual(len(failures), 1)
        self.assertIn("a block per SM", failures[0])
        self.assertIn("1 of 2 variants same bits", text.getvalue())


def run_quick(test, script, quick_var, port_offset, extra_binaries=(), timeout=120):
    """Runs bench/gpu/SCRIPT on the CPU in its quick mode (QUICK_VAR=1); returns its JSON
    lines. Skips `test` when a binary it needs is not built."""
    missing = [b for b in ("fuserank-server", "fuserank-bench", "fuserank-gen-model",
                           *extra_binaries) if binary(b) is None]
    if missing:
        test.skipTest(f"not built: {missing}")
    work = tempfile.mkdtemp(prefix="fuserank-script-test.")
    try:
        # below the ephemeral range (32768+), so no client socket holds it
        env = dict(os.environ, BIN=BIN, E2E_DEVICE="cpu", WORK=work,
                   PORT_BASE=str(20000 + 4 * (os.getpid() % 3000) + port_offset))
        env[quick_var] = "1"
        p = subprocess.run(["bash", os.path.join(GPU, script)], env=env, capture_output=True,
                           text=True, timeout=timeout)
        test.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    BIN = os.path.abspath(args[0]) if args else os.path.join(ROOT, "build", "bin")
    if "--server-e2e" in sys.argv:
        selected = [ServerEndToEnd, ReloadUnderLoad]
    else:
        selected = [Verdicts, ThisBuild, HostTablesCheck, BenchTables]
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(c) for c in selected)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:  # ctest SKIP_RETURN_CODE 77: a check not run never reads as passed
        for test, why in result.skipped:
            print(f"SKIPPED {test.id()}: {why}", file=sys.stderr)
        sys.exit(77)
