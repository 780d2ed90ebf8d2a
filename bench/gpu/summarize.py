#!/usr/bin/env python3
"""Prints the table of a GPU check run from the logs in OUT (check.sh run).

Reads gpu_tests.log (gtest summary), memcheck.log, gpu_bench.log and torch_peer.log
(one JSON object per line) and sets the figures against issue 4's targets.
usage: summarize.py OUT
"""

import json
import os
import re
import sys


def json_lines(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    return rows


def gtest_summary(path):
    if not os.path.exists(path):
        return "not run"
    text = open(path, errors="replace").read()
    parts = []
    for label in ("PASSED", "FAILED", "SKIPPED"):
        m = re.search(r"\[\s+%s\s+\]\s+(\d+) tests?" % label, text)
        if m:
            parts.append(f"{m.group(1)} {label.lower()}")
    if "ERROR SUMMARY" in text:
        parts.append(re.search(r"ERROR SUMMARY: .*", text).group(0))
    return ", ".join(parts) if parts else "no summary (crashed or timed out?)"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "bench/out/gpu"
    ours = json_lines(os.path.join(out, "gpu_bench.log"))
    torch = json_lines(os.path.join(out, "torch_peer.log"))
    print("\n==== fuserank GPU check ====")
    for row in ours:
        if row["bench"] == "device":
            print(f"device: {row['name']} ({row['sms']:.0f} SMs)")
    print(f"gpu_tests: {gtest_summary(os.path.join(out, 'gpu_tests.log'))}")
    print(f"memcheck:  {gtest_summary(os.path.join(out, 'memcheck.log'))}")
    copy = next((r["gbps"] for r in ours if r["bench"] == "copy"), None)
    if copy:
        print(f"\ndevice-to-device copy: {copy:.0f} GB/s")
    lookups = [r for r in ours if r["bench"] == "lookup"]
    if lookups:
        print("\nfused lookup (128-byte rows, L2 flushed)   target: >= 80% of copy at >= 64k lookups")
        print(f"{'lookups':>9} {'bag':>3} {'ids':>7} {'reorder':>7} {'us':>9} {'GB/s':>7} {'%copy':>6}")
        for r in lookups:
            print(f"{r['lookups']:9.0f} {r['bag']:3.0f} {r['ids']:>7} {r['reorder']:7.0f} "
                  f"{r['us']:9.1f} {r['gbps']:7.0f} {r['pct_of_copy']:6.0f}")
    batches = {(r["candidates"], r["graphs"], r["reorder"]): r for r in ours if r["bench"] == "batch"}
    peers = {(r["candidates"], r["mode"]): r for r in torch if r.get("bench") == "torch"}
    if batches or peers:
        print("\ndevice us per batch, 1 request   targets: torch eager / ours >= 5, torch graph / ours >= 1.5")
        print(f"{'cand':>5} {'graphs':>8} {'no graph':>9} {'reorder':>8} {'launch':>6} "
              f"{'torch eg':>9} {'torch gr':>9} {'eager/us':>9} {'graph/us':>9}")
        for n in (16, 256, 1024):
            g = batches.get((n, 1, 0), {})
            ng = batches.get((n, 0, 0), {})
            ro = batches.get((n, 1, 1), {})
            te = peers.get((n, "eager"), {})
            tg = peers.get((n, "graph"), {})
            ours_us = g.get("device_us")

            def ratio(peer):
                return f"{peer['device_us'] / ours_us:9.1f}" if ours_us and "device_us" in peer else f"{'-':>9}"

            def us(row):
                return f"{row['device_us']:9.1f}" if "device_us" in row else f"{'-':>9}"

            print(f"{n:5d} {us(g)[1:]:>8} {us(ng)} {us(ro)[1:]:>8} {g.get('launches', 0):6.0f} "
                  f"{us(te)} {us(tg)} {ratio(te)} {ratio(tg)}")
        for r in torch:
            if "error" in r:
                print(f"torch {r['mode']} {r['candidates']}: {r['error']}")
    steps = os.path.join(out, "steps.txt")
    if os.path.exists(steps):
        print("\nsteps:")
        print(open(steps).read().rstrip())


if __name__ == "__main__":
    main()
