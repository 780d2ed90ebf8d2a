"""Counts of one gtest run from its XML report (--gtest_output=xml:FILE).

A test that ran is passed, skipped or failed: failed = ran - passed - skipped. A missing
or unreadable report means the process died before gtest wrote it (a crash, a kill, a
timeout), and counts as a failure of the whole suite.
"""

import os
import xml.etree.ElementTree as ET


class Counts:
    def __init__(self):
        self.ran = 0
        self.passed = 0
        self.skipped = 0
        self.failed_tests = []  # full names
        self.skipped_tests = []
        self.error = None  # why there are no counts ("no XML report", ...)
        self.first_failure = ""  # the first failure's message, first line

    @property
    def failed(self):
        return self.ran - self.passed - self.skipped


def read(path):
    """Counts of the report at `path`."""
    counts = Counts()
    if not os.path.exists(path):
        counts.error = "no XML report (the process crashed, was killed or timed out)"
        return counts
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        counts.error = f"unreadable XML report ({e})"
        return counts
    for case in root.iter("testcase"):
        if case.get("status", "run") != "run":
            continue  # disabled: not run
        counts.ran += 1
        name = f"{case.get('classname', '?')}.{case.get('name', '?')}"
        failed = case.find("failure") is not None or case.find("error") is not None
        skipped = case.get("result") == "skipped" or case.find("skipped") is not None
        if failed:
            counts.failed_tests.append(name)
            if not counts.first_failure:
                node = case.find("failure")
                if node is None:
                    node = case.find("error")
                message = (node.get("message") or node.text or "").strip()
                counts.first_failure = message.splitlines()[-1][:200] if message else ""
        elif skipped:
            counts.skipped += 1
            counts.skipped_tests.append(name)
        else:
            counts.passed += 1
    return counts
