#!/usr/bin/env python3
"""The verdict of a GPU check run (bench/gpu/check.sh run tests|bench), from its files.

Its last line is `gpu-check: PASS (...)` or `gpu-check: FAIL (...)` with the counts and
the failed steps, and the exit status matches (0 / 1). The rules, so that no run can pass
while testing nothing:
  tests: every suite of suites.py ran in its own process and wrote its XML report; each ran
         at least one test; none failed and none skipped (on the GPU machine a GPU test
         that would skip fails instead, FUSERANK_REQUIRE_GPU=1); every step exited 0;
         memcheck found no error and racecheck no hazard (an error or a warning). A
         sanitizer that could not run is reported, not hidden.
  bench: every step exited 0; the server on the GPU scored every compared request within
         2e-6 of the same server on the CPU, in the same order but for exact ties; the
         /metrics check passed.
usage: summarize.py tests|bench OUT
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gtest_xml  # noqa: E402
from bench_tables import (print_hot_cache, print_kernel_tables, print_reload,  # noqa: E402
                          print_smem_staging, print_sweep)
import suites  # noqa: E402

MAX_SCORE_DIFF = 2e-6


def read_steps(out):
    """{name: (rc, seconds, log)} from steps.tsv (check.sh writes one line per step)."""
    steps = {}
    path = os.path.join(out, "steps.tsv")
    if os.path.exists(path):
        for line in open(path):
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 4:
                steps[parts[0]] = (int(parts[1]), parts[2], parts[3])
    return steps


def last_error_line(out, log):
    """The last line of `log` that names an error, to say where a crash happened."""
    path = os.path.join(out, log)
    if not os.path.exists(path):
        return ""
    hits = [l.strip() for l in open(path, errors="replace")
            if re.search(r"error|Failure|FATAL|Segmentation|Aborted|illegal|no CUDA|cannot", l, re.I)]
    return hits[-1][:160] if hits else ""


def rc_text(rc):
    return {124: "timed out", 137: "killed after its time limit", 139: "segfault",
            134: "aborted", 133: "trapped (SIGTRAP)", 125: "not started (time budget spent)"
            }.get(rc, f"exit {rc}")


def summarize_suite(out, name, steps, failures):
    """One line for suite `name`; appends to `failures` why it failed, if it did."""
    step = steps.get(f"suite:{name}")
    if step is None:
        failures.append(f"{name}: not run")
        return f"{name:12} not run"
    rc, seconds, log = step
    counts = gtest_xml.read(os.path.join(out, "xml", f"{name}.xml"))
    if counts.error:
        where = last_error_line(out, log)
        failures.append(f"{name}: {counts.error.split(' (')[0]}, {rc_text(rc)}")
        return f"{name:12} FAIL {counts.error}; {rc_text(rc)}; {where}"
    line = (f"{name:12} ran {counts.ran:4}  passed {counts.passed:4}  failed {counts.failed:3}  "
            f"skipped {counts.skipped:3}  {seconds:>4}s")
    problems = []
    if counts.ran == 0:
        problems.append("no test ran")
    if counts.failed:
        problems.append(f"{counts.failed} failed")
    if counts.skipped:
        problems.append(f"{counts.skipped} skipped")
    if rc != 0 and not counts.failed:
        problems.append(rc_text(rc))
    if problems:
        first = f" (first: {counts.first_failure})" if counts.first_failure else ""
        failures.append(f"{name}: {', '.join(problems)}{first}")
        for test in counts.failed_tests[:5] + counts.skipped_tests[:3]:
            line += f"\n{'':14}{test}"
    return line


def sanitizer_findings(tool, text):
    """What the last summary line of a compute-sanitizer `tool` log counts: memcheck's
    errors, racecheck's hazards (errors and warnings alike: any hazard fails); None when the
    log has no summary."""
    if tool == "racecheck":
        found = re.findall(r"RACECHECK SUMMARY: (\d+) hazards? displayed", text)
    else:
        found = re.findall(r"ERROR SUMMARY: (\d+) errors?", text)
    return int(found[-1]) if found else None


def sanitizer_state(out, steps, failures, tool):
    """'N errors' (memcheck) or 'N hazards' (racecheck), or why it did not run; appends a
    failure where it found any, or gave no summary."""
    noun = "hazards" if tool == "racecheck" else "errors"
    step = steps.get(tool)
    path = os.path.join(out, f"{tool}.log")
    text = open(path, errors="replace").read() if os.path.exists(path) else ""
    m = re.search(tool + r": not run \(([^)]*)\)", text)
    if m:
        return f"not run ({m.group(1)})"
    if step is None:
        return "not run (the run stopped before it)"
    rc = step[0]
    findings = sanitizer_findings(tool, text)
    counts = gtest_xml.read(os.path.join(out, "xml", f"{tool}.xml"))
    if findings:
        failures.append(f"{tool}: {findings} {noun}")
        return f"{findings} {noun}"
    if findings is None or rc in (124, 137):
        failures.append(f"{tool}: no summary, {rc_text(rc)}")
        return f"no summary ({rc_text(rc)})"
    if counts.error or counts.failed or counts.skipped or counts.ran == 0:
        failures.append(f"{tool}: its tests did not all pass")
        return f"0 {noun}, but its tests: ran {counts.ran}, failed {counts.failed}"
    if rc != 0:
        failures.append(f"{tool}: {rc_text(rc)}")
        return f"0 {noun}, but {rc_text(rc)}"
    return f"0 {noun} in {counts.ran} tests"


def verdict(failures, detail):
    if failures:
        print(f"gpu-check: FAIL ({'; '.join(failures)})")
        return 1
    print(f"gpu-check: PASS ({detail})")
    return 0


def summarize_tests(out):
    steps = read_steps(out)
    failures = []
    print("\n==== fuserank GPU check: tests ====")
    ldd = steps.get("ldd")
    if ldd is not None and ldd[0] != 0:
        failures.append(f"smoke: libraries not found ({ldd[2]})")
    ran = 0
    for name, _ in suites.SUITES:
        print(summarize_suite(out, name, steps, failures))
        counts = gtest_xml.read(os.path.join(out, "xml", f"{name}.xml"))
        ran += counts.passed
    memcheck = sanitizer_state(out, steps, failures, "memcheck")
    print(f"memcheck     {memcheck}")
    racecheck = sanitizer_state(out, steps, failures, "racecheck")
    print(f"racecheck    {racecheck}")
    if "suite:lookup" not in steps and any(f.startswith("smoke:") for f in failures):
        # The run stopped at the smoke step: say why, not every step it then skipped.
        failures = [f for f in failures if f.startswith("smoke:")]
        failures.append("the other suites and the sanitizers were not run")
    return verdict(failures, f"{ran} tests passed in {len(suites.SUITES)} suites; "
                             f"memcheck: {memcheck}; racecheck: {racecheck}")


def json_lines(path):
    rows = []
    if os.path.exists(path):
        for line in open(path, errors="replace"):
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows


def summarize_bench(out):
    steps = read_steps(out)
    failures = []
    print("\n==== fuserank GPU check: bench ====")
    ours = json_lines(os.path.join(out, "gpu_bench.log"))
    torch = json_lines(os.path.join(out, "torch_peer.log"))
    for r in ours:
        if r.get("bench") == "device":
            print(f"device: {r['name']} ({r['sms']:.0f} SMs)")
    print_kernel_tables(ours, torch)
    failures += print_smem_staging(ours)
    e2e = json_lines(os.path.join(out, "server_e2e.log"))
    compares = [r for r in e2e if r.get("bench") == "compare"]
    if compares:
        print(f"server on cuda vs cpu, through gRPC   target: max |score diff| <= {MAX_SCORE_DIFF}")
    unstarted = {}  # the tail of a start error -> the models it stopped
    for r in compares:
        ok = r.get("max_abs_diff", 1) <= MAX_SCORE_DIFF and r.get("order_mismatches", 1) == 0 \
            and r.get("errors", 1) == 0 and r.get("requests", 0) >= 200
        if "problem" in r:
            print(f"  {r.get('model', '?'):22} not compared: {r['problem']}")
            unstarted.setdefault(r["problem"].split(": ", 2)[-1][-150:], []).append(r.get("model"))
            continue
        print(f"  {r.get('model', '?'):22} {r.get('requests', 0):4} requests  max diff "
              f"{r.get('max_abs_diff', float('nan')):.3g}  order mismatches {r.get('order_mismatches')}"
              f"  near-tie swaps {r.get('near_tie_swaps')}  errors {r.get('errors')}  "
              f"{'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"compare {r.get('model')}: diff {r.get('max_abs_diff')}, "
                            f"{r.get('order_mismatches')} order mismatches, {r.get('errors')} errors")
    failures += print_hot_cache(e2e)
    for why, models in unstarted.items():
        failures.append(f"compare {', '.join(models)}: not run: ...{why}")
    for r in e2e:
        if r.get("bench") == "load" and "problem" in r:
            failures.append("load: not run (no server on the device)")
    loads = [r for r in e2e if r.get("bench") == "load" and "problem" not in r]
    if loads:
        print("server on cuda, closed loop through gRPC (fuserank-bench)")
        print(f"  {'model':>8} {'cand':>5} {'conc':>5} {'qps':>9} {'samples/s':>10} "
              f"{'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
        for r in loads:
            print(f"  {r.get('model', 'bench'):>8} {r['candidates']:5} {r['concurrency']:5} "
                  f"{r['qps']:9.0f} {r['qps'] * r['candidates']:10.0f} {r['p50_ms']:8.3f} "
                  f"{r['p99_ms']:8.3f} {r['errors']:7}")
    for r in e2e:
        if r.get("bench") == "metrics":
            print(f"/metrics: {'ok' if r.get('ok') else 'FAIL'} {'; '.join(r.get('problems', []))}")
            if not r.get("ok"):
                failures.append("metrics: " + "; ".join(r.get("problems", [])))
    print_sweep(json_lines(os.path.join(out, "server_sweep.log")))
    failures += print_reload(json_lines(os.path.join(out, "server_reload.log")))
    for name in ("gpu_bench", "torch_peer", "server_e2e", "server_sweep", "server_reload"):
        step = steps.get(name)
        if name in ("server_sweep", "server_reload") and step is None:
            continue  # a run from before the step existed
        if step is None:
            failures.append(f"{name}: not run")
        elif step[0] != 0:
            failures.append(f"{name}: {rc_text(step[0])} ({last_error_line(out, step[2])})")
    if not compares and "server_e2e" in steps:
        failures.append("server_e2e: no comparison result")
    if len(failures) > 6:  # one line: the first few reasons, and how many more
        failures = failures[:6] + [f"and {len(failures) - 6} more (summary.txt)"]
    return verdict(failures, f"{len(compares)} models compared within {MAX_SCORE_DIFF}; "
                             f"{len(loads)} load points")


def main(argv):
    if len(argv) != 3 or argv[1] not in ("tests", "bench"):
        print(__doc__, file=sys.stderr)
        return 2
    return summarize_tests(argv[2]) if argv[1] == "tests" else summarize_bench(argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
