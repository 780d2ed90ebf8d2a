#!/usr/bin/env python3
"""Fails CI on a test that was skipped where CI expects it to run.

A test that skips when something it needs is missing (redis-server, torch, a pip install)
passes in ctest, so a broken install would leave CI green while the test runs nowhere.
After a ctest run that wrote a JUnit file (`ctest --output-junit FILE`), this lists the
skipped tests (SKIP_RETURN_CODE, SKIP_REGULAR_EXPRESSION: gtest's GTEST_SKIP, a batch whose
cases all skipped) and sorts them into
  - expected: a test labelled `gpu` (CI has no GPU), or one that scripts/ci-expected-skips.txt
    lists with its reason (by name, or by what its output says);
  - unexpected: any other, printed with the lines of its output that say why.
With CI set (CI=true, as .ci/run sets it) or --strict an unexpected skip is an error (exit
1); without, it is a warning, as a developer machine may lack what CI installs.

usage: check_skips.py --build BUILD_DIR --junit FILE [--allow FILE] [--strict]
Exit 0: no unexpected skip (or not strict); 1: unexpected skips in strict mode; 2: usage or
an unreadable JUnit file.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ALLOW = os.path.join(ROOT, "scripts", "ci-expected-skips.txt")
ALLOWED_LABELS = {"gpu"}


def in_ci():
    value = os.environ.get("CI", "").strip().lower()
    return value not in ("", "0", "false", "no")


def read_allow(path):
    """Entries `kind | regex | reason`: kind `name` (regex matches the whole ctest name) or
    `output` (regex found in a line of the output that says why the test skipped)."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(" | ")]
            if len(parts) != 3 or parts[0] not in ("name", "output") or not parts[2]:
                raise ValueError(f"{path}:{number}: want 'name|output | regex | reason': {line}")
            try:
                entries.append((parts[0], re.compile(parts[1]), parts[2]))
            except re.error as e:
                raise ValueError(f"{path}:{number}: bad regex {parts[1]!r}: {e}") from e
    return entries


def labels_by_test(build):
    shown = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                           capture_output=True, text=True, check=True)
    labels = {}
    for test in json.loads(shown.stdout).get("tests", []):
        for prop in test.get("properties", []):
            if prop.get("name") == "LABELS":
                labels[test["name"]] = set(prop.get("value") or [])
    return labels


def skipped_tests(junit):
    """(name, output) of every skipped test case of a ctest JUnit file."""
    root = ET.parse(junit).getroot()
    out = []
    for case in root.iter("testcase"):
        if case.find("skipped") is not None:
            out.append((case.get("name", ""), case.findtext("system-out") or ""))
    return out


def reasons(output):
    """The lines of a skipped test's output that say why it skipped: gtest's message after
    its `Skipped` line, and a script's lines that mention skipping (its SKIP line, each
    unittest case's `skipped 'why'`), less the summaries (`[  SKIPPED ] ...`, `OK (skipped=1)`)."""
    lines = output.rstrip("\n").splitlines()
    picked = []
    for i, line in enumerate(lines):
        if line.endswith(": Skipped"):
            if i + 1 < len(lines):
                picked.append(lines[i + 1])
        elif (re.search(r"skip", line, re.IGNORECASE) and "[  SKIPPED ]" not in line
              and not re.match(r"(OK|FAILED) \(.*skipped=", line)):
            picked.append(line)
    return list(dict.fromkeys(p.strip() for p in picked if p.strip()))


def expected_reason(name, output, allow):
    """The reason from `allow` this skip is expected, or None: a `name` entry matching the
    test's name, or `output` entries that match every line saying why it skipped (a test
    skipped for two reasons is expected only if both are)."""
    for kind, regex, reason in allow:
        if kind == "name" and regex.fullmatch(name):
            return reason
    why = reasons(output)
    if not why:
        return None
    found = []
    for line in why:
        match = next((r for k, rx, r in allow if k == "output" and rx.search(line)), None)
        if match is None:
            return None
        found.append(match)
    return "; ".join(dict.fromkeys(found))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="the ctest build directory")
    parser.add_argument("--junit", required=True, help="the file of ctest --output-junit")
    parser.add_argument("--allow", default=DEFAULT_ALLOW, help="expected skips and reasons")
    parser.add_argument("--strict", action="store_true", help="fail as in CI (default: CI set)")
    args = parser.parse_args(argv)
    strict = args.strict or in_ci()
    try:
        allow = read_allow(args.allow)
        skipped = skipped_tests(args.junit)
    except (OSError, ValueError, ET.ParseError) as e:
        print(f"check_skips: {e}", file=sys.stderr)
        return 2
    if not skipped:
        print("check_skips: no test was skipped")
        return 0
    labels = labels_by_test(args.build)
    expected, unexpected = {}, []
    for name, output in skipped:
        if labels.get(name, set()) & ALLOWED_LABELS:
            expected.setdefault("label gpu: no GPU in CI", []).append(name)
            continue
        reason = expected_reason(name, output, allow)
        if reason:
            expected.setdefault(reason, []).append(name)
        else:
            unexpected.append((name, output))
    for reason, names in expected.items():
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        print(f"check_skips: expected skip ({reason}): {shown}")
    if not unexpected:
        print(f"check_skips: all {len(skipped)} skipped tests are expected to skip here")
        return 0
    word = "FAILED" if strict else "warning"
    print(f"check_skips: {word}: {len(unexpected)} test(s) skipped that CI expects to run "
          f"(install what they need: scripts/install-deps.sh; or, if they cannot run on a CI "
          f"machine, list them with the reason in {os.path.relpath(args.allow, ROOT)}):")
    for name, output in unexpected:
        print(f"  {name}")
        lines = output.rstrip("\n").splitlines()
        for line in reasons(output)[:5] or lines[-5:] or ["(no output)"]:
            print(f"      {line}")
    return 1 if strict else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
