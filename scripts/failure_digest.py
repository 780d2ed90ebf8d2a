#!/usr/bin/env python3
"""The few lines that say why each failed ctest test failed, from ctest's LastTest.log.

A failed test's full output can run to thousands of lines (server logs), and CI logs are
read from their head and tail, so the reason is easily lost in the middle. This prints, per
failed test, its sanitizer reports (header, summary and the first stack frames), gtest
failures (the assertion and the lines that explain it), and the last lines of its output.

usage: failure_digest.py LAST_TEST_LOG LAST_TESTS_FAILED_LOG [--frames N] [--tail N]
"""
import argparse
import re
import sys

SANITIZER = re.compile(
    r"(WARNING: ThreadSanitizer|ERROR: AddressSanitizer|ERROR: LeakSanitizer|"
    r"runtime error:|SUMMARY: \w+Sanitizer)")
FRAME = re.compile(r"^\s+#\d+ ")
GTEST_FAILURE = re.compile(r"(: Failure$|^\[  FAILED  \]|^unknown file: Failure|C\+\+ exception)")


def test_outputs(log_text):
    """{test name: output} from ctest's LastTest.log."""
    outputs = {}
    # Each test: '<n>/<m> Testing: NAME' ... 'Output:' line, dashes, the output, then
    # '<end of output>'.
    for match in re.finditer(
            r"^\d+/\d+ Testing: (?P<name>[^\n]+)\n.*?^Output:\n-+\n(?P<out>.*?)<end of output>$",
            log_text, re.S | re.M):
        outputs[match.group("name").strip()] = match.group("out")
    return outputs


def digest(output, frames, tail):
    lines = output.splitlines()
    keep = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if SANITIZER.search(line):
            keep.append(line)
            shown = 0
            j = i + 1
            while j < len(lines) and shown < frames and j - i < 4 * frames:
                if FRAME.match(lines[j]) or lines[j].startswith(("  Read of", "  Write of",
                                                                  "  Previous", "  Location",
                                                                  "  Thread", "  Mutex")):
                    keep.append(lines[j])
                    shown += FRAME.match(lines[j]) is not None
                j += 1
            i = j
            continue
        if GTEST_FAILURE.search(line):
            keep.extend(lines[i:i + 6])
            i += 6
            continue
        i += 1
    keep.append("  ... last lines of the output:")
    keep.extend("  " + line for line in lines[-tail:])
    return keep


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("last_test_log")
    parser.add_argument("failed_log")
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--tail", type=int, default=8)
    args = parser.parse_args()
    try:
        failed = [line.split(":", 1)[1].strip()
                  for line in open(args.failed_log, encoding="utf-8", errors="replace")
                  if ":" in line]
        log_text = open(args.last_test_log, encoding="utf-8", errors="replace").read()
    except OSError as error:
        print(f"failure digest: cannot read the ctest logs: {error}")
        return 0
    outputs = test_outputs(log_text)
    for name in failed:
        print(f"---- {name}")
        if name not in outputs:
            print("  (no output recorded in LastTest.log)")
            continue
        for line in digest(outputs[name], args.frames, args.tail):
            print(line[:400])
    return 0


if __name__ == "__main__":
    sys.exit(main())
