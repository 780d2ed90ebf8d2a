#!/usr/bin/env python3
"""Helpers of bench/run_kserve_bench.sh (standard library only).

  report.py snapshot --pid=P --metrics=FILE    the server's CPU seconds and stage metrics
  report.py run --client=rank|infer --candidates=N --repeat=R --result=PREFIX
                --before=JSON --after=JSON       one run's figures, as a JSON line
  report.py markdown --out=DIR --docs=FILE     the docs section from DIR/runs.jsonl
"""

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys

SECTION = "## KServe v2 (Triton protocol) through perf_analyzer"
BEGIN, END = "<!-- kserve-bench:begin -->", "<!-- kserve-bench:end -->"
SERIES = re.compile(r'^(\w+)\{([^}]*)\}\s+(\S+)$')
RPC = {"rank": "Rank", "infer": "ModelInfer"}
CLIENT = {"rank": "fuserank-bench -> `Ranker/Rank`",
          "infer": "perf_analyzer -> `GRPCInferenceService/ModelInfer`"}

INTRO = """\
`bench/run_kserve_bench.sh` (`make bench-kserve`) serves the bench model of the CPU suite
with `fuserank-server` (`engine.device: cpu`) and drives it, one client after the other,
with Triton's `perf_analyzer` through the KServe v2 protocol (`-i grpc`, no shared memory,
input data as JSON) and with `fuserank-bench` through `Rank`. Both send the same requests:
`fuserank-kserve-data` writes fuserank-bench's request pool (512 requests, seed 1, Zipf
1.05 ids, one id per feature, top_k 10) as perf_analyzer input data, the SPEC section 6
tensors with `top_k` as a request parameter. Around every run the script reads the server's
CPU time (`/proc/<pid>/stat`) and its `decode` and `encode` stage metrics, so the table
also says what each protocol costs the server per request, whatever the client costs.
"""


def parse_metrics(path):
    values = {}
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return values
    for line in lines:
        m = SERIES.match(line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            values[(m.group(1), tuple(sorted(labels.items())))] = float(m.group(3))
    return values


def snapshot(args):
    fields = open(f"/proc/{args.pid}/stat").read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    metrics = parse_metrics(args.metrics)
    out = {"cpu_s": cpu}
    for stage in ("decode", "encode"):
        labels = (("stage", stage),)
        out[f"{stage}_sum"] = metrics.get(("fuserank_stage_duration_seconds_sum", labels), 0)
        out[f"{stage}_count"] = metrics.get(("fuserank_stage_duration_seconds_count", labels), 0)
    for rpc in RPC.values():
        ok = bad = 0.0
        for (name, labels), value in metrics.items():
            d = dict(labels)
            if name == "fuserank_requests_total" and d.get("rpc") == rpc:
                if d.get("code") == "OK":
                    ok += value
                else:
                    bad += value
        out[f"{rpc}_ok"], out[f"{rpc}_errors"] = ok, bad
    print(json.dumps(out))


def perf_analyzer_errors(prefix):
    """The failed requests perf_analyzer reported in its output (PREFIX.out): the sum of
    any "... count: N" line that names errors or failures, plus one per "had error" line
    (a load thread that stopped on an error). None when the output is missing."""
    try:
        text = open(prefix + ".out").read()
    except OSError:
        return None
    counted = sum(int(m.group(1)) for m in re.finditer(
        r"(?:error|fail)\w*(?: request)?s? count:\s*(\d+)", text, re.I))
    counted += len(re.findall(r"had error", text, re.I))
    return counted


def client_figures(client, prefix):
    """qps and latency percentiles (ms) of one run, or None when it produced none."""
    if client == "rank":
        try:
            line = open(prefix + ".out").read().strip().splitlines()[-1]
            r = json.loads(line)
        except (OSError, IndexError, ValueError):
            return None
        return {"qps": r["qps"], "p50_ms": r["p50_ms"], "p90_ms": r["p90_ms"],
                "p99_ms": r["p99_ms"], "client_errors": r["errors"]}
    try:
        rows = open(prefix + ".csv").read().strip().splitlines()
    except OSError:
        return None
    if len(rows) < 2:
        return None
    row = dict(zip(rows[0].split(","), rows[1].split(",")))
    us = lambda key: float(row[key]) / 1000.0
    return {"qps": float(row["Inferences/Second"]), "p50_ms": us("p50 latency"),
            "p90_ms": us("p90 latency"), "p99_ms": us("p99 latency"),
            "client_errors": perf_analyzer_errors(prefix) or 0}


def run(args):
    before, after = json.loads(args.before), json.loads(args.after)
    rpc = RPC[args.client]
    figures = client_figures(args.client, args.result) or {}
    ok = after[f"{rpc}_ok"] - before[f"{rpc}_ok"]
    per = lambda key: (after[key] - before[key]) / ok if ok > 0 else None
    out = {"client": args.client, "candidates": args.candidates, "repeat": args.repeat,
           "server_ok": ok, "server_errors": after[f"{rpc}_errors"] - before[f"{rpc}_errors"],
           "cpu_ms_per_request": None if per("cpu_s") is None else per("cpu_s") * 1e3}
    for stage in ("decode", "encode"):
        count = after[f"{stage}_count"] - before[f"{stage}_count"]
        total = after[f"{stage}_sum"] - before[f"{stage}_sum"]
        out[f"{stage}_us"] = total / count * 1e6 if count > 0 else None
    out.update(figures)
    print(json.dumps(out))


def fmt(value, digits=3):
    if value is None:
        return "-"
    if digits == 0 or abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def machine():
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = re.search(r"Model name:\s*(.+)", lscpu).group(1).strip()
    except (OSError, AttributeError):
        model = platform.processor() or "unknown CPU"
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{model}, {os.cpu_count()} cores, {mem:.0f} GiB RAM; Linux {platform.release()}"


def table(runs):
    lines = ["| candidates | client -> RPC | qps | p50 ms | p90 ms | p99 ms | server CPU ms / request "
             "| server decode us / request | server encode us / request | errors |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    keys = sorted({(r["candidates"], r["client"]) for r in runs},
                  key=lambda k: (int(k[0]), k[1] != "rank"))
    for n, client in keys:
        group = [r for r in runs if r["candidates"] == n and r["client"] == client]
        med = lambda key: (statistics.median([r[key] for r in group if r.get(key) is not None])
                           if any(r.get(key) is not None for r in group) else None)
        errors = sum(r.get("server_errors", 0) + r.get("client_errors", 0) for r in group)
        lines.append(f"| {n} | {CLIENT[client]} | {fmt(med('qps'), 0)} | {fmt(med('p50_ms'))} "
                     f"| {fmt(med('p90_ms'))} | {fmt(med('p99_ms'))} "
                     f"| {fmt(med('cpu_ms_per_request'))} | {fmt(med('decode_us'), 1)} "
                     f"| {fmt(med('encode_us'), 1)} | {errors:.0f} |")
    return lines


def section(out):
    run_info = json.load(open(f"{out}/run.json"))
    runs = [json.loads(l) for l in open(f"{out}/runs.jsonl")] if os.path.exists(
        f"{out}/runs.jsonl") else []
    start = open(f"{out}/loadavg_start.txt").read().split()
    end = open(f"{out}/loadavg_end.txt").read().split()
    notes = open(f"{out}/perf_analyzer_setup.txt").read().strip().splitlines()
    version = (open(f"{out}/perf_analyzer_version.txt").read().strip()
               if os.path.exists(f"{out}/perf_analyzer_version.txt") else "")
    sizes = []
    for name in sorted(os.listdir(out)):
        m = re.match(r"data_n(\d+)\.txt$", name)
        if m:
            d = json.loads(open(f"{out}/{name}").read())
            sizes.append((int(m.group(1)), d))
    lines = [BEGIN, ""]
    cores = os.cpu_count() or 1
    if float(start[0]) > 0.5 * cores:
        lines += [f"**The machine was busy when this ran (load average {start[0]} on {cores} "
                  "cores at the start): the figures are noisy and low for both clients. Rerun on "
                  "a quiet machine before quoting them.**", ""]
    lines += [f"_Generated by bench/run_kserve_bench.sh ({run_info['seconds']} s) on "
              f"{run_info['started']}, commit {run_info['commit']}. Rerun to replace; do not "
              "edit by hand._", "",
              f"- Machine: {machine()}.",
              f"- Load average (1, 5, 15 min): {' '.join(start)} at the start, {' '.join(end)} at "
              "the end (other work on the machine shows here).",
              f"- perf_analyzer: {run_info['pa_route'] or 'did not run'}"
              f"{f' ({version})' if version else ''}."]
    lines += [f"  - {n}" for n in notes]
    for n, d in sizes:
        lines.append(f"- {n} candidates: mean request {d['mean_rank_request_bytes']:,.0f} bytes "
                     f"as a RankRequest, {d['mean_infer_request_bytes']:,.0f} bytes as a "
                     "ModelInferRequest (raw_input_contents).")
    lines += ["", f"Closed loop, concurrency {run_info['concurrency']}, median of "
              f"{run_info['repeats']} runs per row; fuserank-bench: {run_info['duration']} s after "
              "3 s of warm-up; perf_analyzer: three windows of "
              f"{run_info['duration'] * 1000 // 3} ms after 500 warm-up requests "
              "(`-s 100 -r 3`: reported however the windows vary). Latency as each client "
              "measures it.", ""]
    lines += table(runs) if runs else ["No run produced figures: see bench/out/kserve/logs."]
    lines += ["", "Commands, as run:", "", "```sh"]
    lines += open(f"{out}/commands.txt").read().strip().splitlines()
    lines += ["```", "", END]
    return "\n".join(lines)


def markdown(args):
    text = section(args.out)
    docs = open(args.docs).read() if os.path.exists(args.docs) else ""
    if BEGIN in docs and END in docs:
        head, rest = docs.split(BEGIN, 1)
        docs = head + text + rest.split(END, 1)[1]
    else:
        docs = docs.rstrip("\n") + f"\n\n{SECTION}\n\n{INTRO}\n{text}\n"
    with open(args.docs, "w") as f:
        f.write(docs)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("snapshot")
    s.add_argument("--pid", required=True)
    s.add_argument("--metrics", required=True)
    r = sub.add_parser("run")
    for flag in ("--client", "--candidates", "--repeat", "--result", "--before", "--after"):
        r.add_argument(flag, required=True)
    m = sub.add_parser("markdown")
    m.add_argument("--out", required=True)
    m.add_argument("--docs", required=True)
    args = parser.parse_args(argv)
    {"snapshot": snapshot, "run": run, "markdown": markdown}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
