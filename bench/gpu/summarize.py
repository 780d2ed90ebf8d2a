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


def print_kernel_tables(ours, torch):
    copy = next((r["gbps"] for r in ours if r.get("bench") == "copy"), None)
    if copy:
        print(f"device-to-device copy: {copy:.0f} GB/s")
    lookups = [r for r in ours if r.get("bench") == "lookup"]
    if lookups:
        print("fused lookup (L2 flushed)   target: >= 80% of copy at >= 64k lookups")
        print(f"{'rows':>8} {'lookups':>9} {'bag':>3} {'ids':>7} {'reorder':>7} {'pf':>2} {'us':>9}"
              f" {'GB/s':>7} {'%copy':>6} {'host us':>9} {'dev+host':>9}")
        for r in lookups:
            rows = f"{r.get('dtype', 'fp32')} {r.get('dim', 32):.0f}"
            print(f"{rows:>8} {r['lookups']:9.0f} {r['bag']:3.0f} {r['ids']:>7} {r['reorder']:7.0f} "
                  f"{r.get('prefetch', 0):2.0f} "
                  f"{r['us']:9.1f} {r['gbps']:7.0f} {r['pct_of_copy']:6.0f}"
                  f" {r.get('host_pack_us', 0):9.1f} {r.get('us_with_host_pack', 0):9.1f}")
    batches = {(r["candidates"], r["graphs"], r["reorder"], r.get("stage_events", 1),
                r.get("autotune", 1)): r
               for r in ours if r.get("bench") == "batch"}
    peers = {(r["candidates"], r["mode"]): r for r in torch if r.get("bench") == "torch"}
    if not (batches or peers):
        return
    print("device us per batch, 1 request, a pool of 64 distinct batches cycled   targets: torch eager / ours >= 5, torch graph / ours >= 1.5")
    print(f"{'cand':>5} {'graphs':>8} {'no graph':>9} {'launch':>6} {'torch eg':>9} {'torch gr':>9} "
          f"{'eager/us':>9} {'graph/us':>9} {'no events':>9} {'heur algo':>9}")

    def us(row):
        return f"{row['device_us']:9.1f}" if "device_us" in row else f"{'-':>9}"

    for n in (16, 256, 1024):
        g, ng = batches.get((n, 1, 0, 1, 1), {}), batches.get((n, 0, 0, 1, 1), {})
        # The same graphs without their stage event nodes: what the nodes cost; and with the
        # MLPs on the cuBLASLt heuristic's first algorithms: what the autotune gains.
        quiet = batches.get((n, 1, 0, 0, 1), {})
        heuristic = batches.get((n, 1, 0, 1, 0), {})
        te, tg = peers.get((n, "eager"), {}), peers.get((n, "graph"), {})
        ours_us = g.get("device_us")

        def ratio(peer):
            return f"{peer['device_us'] / ours_us:9.1f}" if ours_us and "device_us" in peer else f"{'-':>9}"

        print(f"{n:5d} {us(g)[1:]:>8} {us(ng)} {g.get('launches', 0):6.0f} {us(te)} {us(tg)} "
              f"{ratio(te)} {ratio(tg)} {us(quiet)} {us(heuristic)}")
    algos = [r for r in ours if r.get("bench") == "mlp_algo"]
    if algos:
        print("MLP algorithms (autotune: the heuristic's first that ran -> the one kept, us per matmul)")
        for r in algos:
            print(f"  {r['plan']:>6} layer {r['layer']:.0f} ({r['in']:.0f} -> {r['out']:.0f}) "
                  f"{r['rows']:5.0f} rows: kept proposal {r['index']:.0f} (0: the heuristic's "
                  f"first), {r['ran']:.0f} ran, "
                  + (f"{r['first_us']:.1f} -> {r['chosen_us']:.1f}" if r['first_us'] > 0
                     else "not timed"))
    hosts = [r for r in ours if r.get("bench") == "host_tables"]
    if hosts:
        print("cache.placement: host (tables in mapped host memory), device us per batch, graphs on")
        print(f"{'zipf':>5} {'cand':>5} {'hot':>5} {'host':>9} {'device':>9} {'x':>6} {'hit rate':>8}")
        for r in hosts:
            print(f"{r['zipf']:5.2f} {r['candidates']:5.0f} {r['hot_rows']:5.0f} {r['device_us']:9.1f} "
                  f"{r['device_tables_us']:9.1f} {r['device_us'] / r['device_tables_us']:6.2f} "
                  f"{r['hit_rate']:8.3f}")


def print_smem_staging(ours):
    """The shared-memory staging experiment's table; its failures (a variant whose pooled
    values differ from the plain lookup's: its time means nothing)."""
    rows = [r for r in ours if r.get("bench") == "smem_staging"]
    checks = [r for r in ours if r.get("bench") == "smem_staging_check"]
    failures = []
    if checks:
        differ = [r for r in checks if r.get("same_bits") != 1]
        print(f"hot rows staged in shared memory, bit check on weighted multi-id bags: "
              f"{len(checks) - len(differ)} of {len(checks)} variants same bits")
        for r in differ:
            failures.append(f"smem_staging_check: {r['variant']} (staged {r['staged']:.0f}) pools "
                            f"other values than the plain lookup")
    if not rows:
        return failures
    print("hot rows staged in shared memory vs the plain lookup (L2 warm, 8 batches cycled), us")
    print(f"{'zipf':>5} {'cand':>5} {'variant':>24} {'staged':>6} {'hit rate':>8} {'us':>8} "
          f"{'plain':>8} {'x':>6} {'bits':>5}")
    for r in rows:
        same = r.get("same_bits") == 1
        print(f"{r['zipf']:5.2f} {r['candidates']:5.0f} {r['variant']:>24} {r['staged']:6.0f} "
              f"{r['hit_rate']:8.3f} {r['us']:8.1f} {r['plain_us']:8.1f} "
              f"{r['us'] / r['plain_us']:6.2f} {'same' if same else 'DIFF':>5}")
        if not same:
            failures.append(f"smem_staging: {r['variant']} (staged {r['staged']:.0f}, "
                            f"{r['candidates']:.0f} candidates) pools other values than the plain lookup")
    return failures


def print_hot_cache(rows):
    """The placement: host server's device-cache line; its failures (no hit)."""
    failures = []
    for r in rows:
        if r.get("bench") == "hot_cache":
            print(f"cache.placement: host, device hot-row cache: {r.get('hits', 0):.0f} hits, "
                  f"{r.get('misses', 0):.0f} misses (hit rate {r.get('hit_rate', 0):.2f})")
            if not r.get("ok"):
                failures.append("hot_cache: " + "; ".join(r.get("problems", [])))
    return failures


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


def print_reload(rows):
    """The server_reload.sh table; returns the failures it shows."""
    windows = [r for r in rows if r.get("bench") == "reload"]
    summary = next((r for r in rows if r.get("bench") == "reload_summary"), None)
    if not windows and summary is None:
        return []
    print("server on cuda, reload under load   target: no failed request, p99 swapping <= 2x steady")
    for r in windows:
        if "problem" in r:
            print(f"  {r['window']:>6} not measured: {r['problem'][:150]}")
            continue
        print(f"  {r['window']:>6} {r['qps']:8.0f} qps  p50 {r['p50_ms']:7.3f} ms  p99 {r['p99_ms']:7.3f} ms"
              f"  errors {r['errors']}  reloads {r['reloads']}")
    if summary is None:
        return ["reload: no summary"]
    if "problem" in summary:
        return [f"reload: {summary['problem'][:150]}"]
    print(f"  p99 swapping / steady: {summary['p99_ratio']:.2f}; {summary['reloads']} reloads;"
          f" {summary['errors']} failed requests")
    failures = []
    if summary["errors"] > 0:
        failures.append(f"reload: {summary['errors']} failed requests")
    if any(r.get("reloads", 0) == 0 for r in windows if r["window"] == "swap"):
        failures.append("reload: a swap window saw no reload")
    return failures


def print_sweep(rows):
    """The server_sweep.sh table: settings x concurrency, with the server's stage means."""
    rows = [r for r in rows if r.get("bench") == "sweep"]
    if not rows:
        return
    print("server on cuda, 256 candidates, engine settings   target: >= 10000 qps at p99 <= 1 ms")
    print(f"  {'setting':>24} {'conc':>4} {'qps':>7} {'p50 ms':>7} {'p99 ms':>7} {'cores':>5}"
          f" {'call':>6} {'decode':>6} {'queue':>6} {'device':>6} {'encode':>6} {'batch':>5}")
    for r in rows:
        if "problem" in r:
            print(f"  {r.get('setting', '?'):>24} not run: {r['problem'][:150]}")
            continue
        device = sum(r.get(k, 0) for k in ("lookup_us", "cross_us", "dnn_us", "topk_us"))
        print(f"  {r['setting']:>24} {r['concurrency']:4} {r['qps']:7.0f} {r['p50_ms']:7.3f}"
              f" {r['p99_ms']:7.3f} {r.get('cpu_busy_cores', 0):5.1f} {r.get('request_us', 0):6.0f}"
              f" {r.get('decode_us', 0):6.0f} {r.get('queue_us', 0):6.0f} {device:6.0f}"
              f" {r.get('encode_us', 0):6.0f} {r.get('batch_requests', 0):5.2f}")
    print("  (call, decode, queue, device = lookup+cross+dnn+top-K stage events, encode: server means"
          " in us; batch: requests per batch; cores: busy cores of the machine, client included)")


def main(argv):
    if len(argv) != 3 or argv[1] not in ("tests", "bench"):
        print(__doc__, file=sys.stderr)
        return 2
    return summarize_tests(argv[2]) if argv[1] == "tests" else summarize_bench(argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
