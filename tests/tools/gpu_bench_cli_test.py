#!/usr/bin/env python3
"""fuserank-gpu-bench's command line, which needs no GPU: --help prints the usage and exits
0, an argument it does not know is refused (exit 2). The binary comes from
$FUSERANK_GPU_BENCH; ctest registers this suite only where CUDA is built (the binary exists
there), and without the variable the case skips and the run exits 77 (unittest_main), so a
check not run never reads as passed."""
import os
import sys
import unittest

import cli_test

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
from unittest_main import run_tests  # noqa: E402

GPU_BENCH = os.environ.get("FUSERANK_GPU_BENCH", "")


class GpuBenchHelpTest(unittest.TestCase):
    def test_help_needs_no_gpu_and_an_unknown_argument_is_refused(self):
        if not GPU_BENCH or not os.path.exists(GPU_BENCH):
            self.skipTest("fuserank-gpu-bench not built (FUSERANK_GPU_BENCH unset or missing: "
                          "no CUDA in this build)")
        done = cli_test.run(GPU_BENCH, "--help")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("usage: fuserank-gpu-bench [--quick]", done.stdout)
        done = cli_test.run(GPU_BENCH, "--qiuck")
        self.assertEqual(done.returncode, 2, f"stdout {done.stdout!r} stderr {done.stderr!r}")
        self.assertIn("unknown argument '--qiuck'", done.stderr)


if __name__ == "__main__":
    run_tests()
