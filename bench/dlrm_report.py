#!/usr/bin/python3
"""Summarizes bench/run_dlrm_bench.sh's results (medians over repeats) as a Markdown
table: candidates/s (= requests/s x candidates; an MLPerf DLRM-v2 sample is 100-700 of
them), request latency p50 / p99 with the calls
they come from (a p99 of fewer than 1,000 calls is printed as the maximum), errors. Prints it, and
with --markdown replaces the text between the dlrm-bench markers of that file."""
import argparse
import glob
import json
import os
import statistics
import sys

BEGIN, END = "<!-- dlrm-bench:begin -->", "<!-- dlrm-bench:end -->"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--markdown")
    args = p.parse_args()
    run = json.load(open(os.path.join(args.results, "run.json")))
    lines = [BEGIN, "",
             f"Measured {run.get('started', run['date'])} to {run.get('ended', '?')} on {run['cpu']} ({run['cores']} cores), commit "
             f"{run['commit']}: the DLRM-v2 preset at row scale {run['row_scale']}, "
             f"{run['size']} candidates per request, closed loop at concurrency "
             f"{run['concurrency']}, {run['duration']} s x {run['repeats']} (medians); load average "
             f"at the start {run.get('loadavg_at_start', '?')}, at the end {run.get('loadavg_at_end', '?')} "
             "(the machine is shared). calls: OK calls of the median run, the percentiles' sample; "
             "under 1,000 calls the p99 is the run's maximum and shown as such.", "",
             "| system | candidates/s (user-item pairs, not MLPerf samples) | requests/s | calls | p50 ms | p99 ms | errors (all runs) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for system in ("fuserank", "torch", "ort"):
        rows = [json.load(open(f)) for f in sorted(glob.glob(
            os.path.join(args.results, f"{system}_r*.json")))]
        if not rows:
            lines.append(f"| {system} | (no result) | | | | | |")
            continue
        qps = statistics.median(r["qps"] for r in rows)
        calls = statistics.median(r["ok"] for r in rows)
        if calls >= 1000:
            p99 = f"{statistics.median(r['p99_ms'] for r in rows):.1f}"
        else:
            p99 = f"max {statistics.median(r['max_ms'] for r in rows):.1f}"
        errors = sum(r["errors"] for r in rows)
        lines.append(f"| {system} | {qps * run['size']:,.0f} | {qps:.2f} | {calls:,.0f} | "
                     f"{statistics.median(r['p50_ms'] for r in rows):.1f} | {p99} | {errors:,} |")
    for name, peer in (("compare.json", "the PyTorch peer"), ("compare_ort.json", "the ONNX Runtime peer")):
        compare = os.path.join(args.results, name)
        if os.path.exists(compare) and os.path.getsize(compare) > 0:
            lines += ["", f"Scores of fuserank against {peer}: `{open(compare).read().strip()}`"]
    note = os.path.join(args.results, "ort_note.txt")
    if os.path.exists(note):
        lines += ["", open(note).read().strip()]
    lines += ["", "Commands, as run:", "", "```"]
    lines += open(os.path.join(args.results, "commands.txt")).read().splitlines()
    lines += ["```", "", END]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        doc = open(args.markdown).read()
        if BEGIN not in doc or END not in doc:
            sys.exit(f"{args.markdown}: no {BEGIN} ... {END} section")
        head, rest = doc.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        with open(args.markdown, "w") as f:
            f.write(head + text + tail)


if __name__ == "__main__":
    main()
