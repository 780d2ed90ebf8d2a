#!/usr/bin/env python3
"""scripts/failure_digest.py: the reason a test failed survives thousands of log lines."""

import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGEST = os.path.join(ROOT, "scripts", "failure_digest.py")


def entry(index, name, output, passed):
    return (f"{index}/9 Testing: {name}\n{index}/9 Test: {name}\nCommand: \"x\"\n"
            f"Directory: /tmp\n\"{name}\" start time: Dec 01 12:53 UTC\nOutput:\n"
            f"----------------------------------------------------------\n{output}"
            f"<end of output>\nTest time =   0.52 sec\n"
            f"----------------------------------------------------------\n"
            f"Test {'Passed' if passed else 'Failed'}.\n\n")


class FailureDigestTest(unittest.TestCase):
    def digest(self, log, failed):
        with tempfile.TemporaryDirectory() as tmp:
            last, failed_log = os.path.join(tmp, "LastTest.log"), os.path.join(tmp, "failed")
            with open(last, "w") as f:
                f.write("Start testing: Dec 01 12:53 UTC\n" + log)
            with open(failed_log, "w") as f:
                f.write("".join(f"{i}:{name}\n" for i, name in enumerate(failed, 1)))
            done = subprocess.run([sys.executable, DIGEST, last, failed_log],
                                  capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def test_a_sanitizer_report_in_a_long_output_is_kept_and_the_noise_dropped(self):
        noise = "".join(f"[info] admin SetHotRows version {i}\n" for i in range(3000))
        report = ("WARNING: ThreadSanitizer: data race (pid=1)\n"
                  "  Write of size 8 at 0x1 by thread T3:\n"
                  "    #0 fuserank::engine::HotRowSet::Swap hot_row_set.cc:42\n"
                  "    #1 fuserank::server::AdminService::SetHotRows admin_service.cc:9\n"
                  "SUMMARY: ThreadSanitizer: data race hot_row_set.cc:42 in Swap\n")
        out = self.digest(entry(1, "Fine.Test", "ok\n", True) +
                          entry(2, "Racy.Test", noise + report + noise[:200], False),
                          ["Racy.Test"])
        self.assertIn("---- Racy.Test", out)
        self.assertIn("WARNING: ThreadSanitizer: data race", out)
        self.assertIn("HotRowSet::Swap hot_row_set.cc:42", out)
        self.assertIn("SUMMARY: ThreadSanitizer", out)
        self.assertNotIn("Fine.Test", out)
        self.assertLess(len(out.splitlines()), 40)

    def test_a_gtest_failure_shows_the_assertion(self):
        output = ("[ RUN      ] A.B\nfoo_test.cc:12: Failure\nExpected equality of these values:\n"
                  "  failed.load()\n    Which is: 3\n  0\n[  FAILED  ] A.B (520 ms)\n")
        out = self.digest(entry(1, "A.B", output, False), ["A.B"])
        self.assertIn("foo_test.cc:12: Failure", out)
        self.assertIn("Which is: 3", out)

    def test_a_failed_test_without_recorded_output_says_so(self):
        out = self.digest(entry(1, "A.B", "x\n", True), ["Missing.Test"])
        self.assertIn("---- Missing.Test", out)
        self.assertIn("no output recorded", out)


if __name__ == "__main__":
    unittest.main()
