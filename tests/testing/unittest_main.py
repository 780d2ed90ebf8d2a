"""unittest.main for the Python suites under ctest's convention (SKIP_RETURN_CODE 77): exit
1 on a failure, else 77 when a case was skipped, each named with its reason on stderr, so
that a check not run never reads as passed. Importers put this folder on sys.path."""
import sys
import unittest

SKIP_EXIT_CODE = 77  # ctest SKIP_RETURN_CODE: reported as skipped, never as passed


def run_tests():
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:
        for test, why in result.skipped:
            print(f"SKIPPED {test.id()}: {why}", file=sys.stderr)
        sys.exit(SKIP_EXIT_CODE)
    sys.exit(0)
