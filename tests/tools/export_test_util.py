"""Shared by the exporter tests without a server (export_test.py,
export_state_dict_test.py): a test case with its own temporary folder, the comparison of
torch's scores with the NumPy reference over the exported files (numpy_reference.py), and
the exporter run as a command line or in this process. Imported first by the tests: it
exits 77 (skipped) when torch is missing."""

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SKIP_EXIT_CODE = 77  # ctest SKIP_RETURN_CODE: reported as skipped, never as passed

try:
    import torch  # noqa: F401  (the fixtures and the exporter need it)
except ImportError:
    print("SKIP: python3-torch is not installed (scripts/install-deps.sh --bench installs "
          "it); the exporter tests need it", file=sys.stderr)
    sys.exit(SKIP_EXIT_CODE)

import export_fixtures as fx  # noqa: E402
import numpy_reference as ref  # noqa: E402
import fuserank_export as fe  # noqa: E402  (tools/ is on sys.path via export_fixtures)

TOLERANCE = 5e-5
EXPORTER = os.path.join(fx.REPO, "tools", "fuserank_export.py")


class ExportTestBase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="fuserank_export_test_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def assert_scores_match(self, model, spec_path, seed, requests=4):
        """Torch's forward vs the NumPy reference over the exported files."""
        spec, weights, _ = ref.load_model(spec_path)
        rng = np.random.default_rng(seed)
        all_scores = []
        for r in range(requests):
            request = fx.random_request(rng, model, int(rng.integers(1, 24)))
            expected = model.score_request(request).double().numpy()
            got = ref.score(spec, weights, request)
            diff = np.abs(got - expected)
            self.assertLess(diff.max(), TOLERANCE,
                            f"seed {seed}, request {r}: candidate {diff.argmax()} differs by "
                            f"{diff.max():.3g} (reference {got[diff.argmax()]}, torch "
                            f"{expected[diff.argmax()]})")
            all_scores += list(expected)
        # Scores that all sit at 0 or 1 would make the comparison meaningless.
        self.assertGreater(np.std(all_scores), 1e-2, f"seed {seed}: degenerate scores")

    def run_cli(self, *args):
        """The command line in a child process (each one imports torch: keep them few)."""
        return subprocess.run([sys.executable, EXPORTER, *args], capture_output=True, text=True,
                              cwd=fx.REPO, timeout=120)

    def run_main(self, *args):
        """fuserank_export.main in this process: (exit status, stderr)."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                status = fe.main(list(args))
            except SystemExit as e:  # argparse usage errors
                status = e.code
        return status, err.getvalue()

