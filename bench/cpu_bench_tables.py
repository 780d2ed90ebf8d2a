"""The tables of the generated CPU section of docs/benchmarks.md (bench/plot.py): the
closed- and open-loop server tables, the engine's forward-alone figures beside the peers',
the targets and the microbenchmarks, from the JSON results bench/run_cpu_bench.sh writes.
Pure functions of the results; markdown lines out.
"""

import glob
import json
import os
import re
import statistics

NAMES = {"fuserank": "fuserank", "torch": "PyTorch peer"}


def load(pattern):
    out = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            text = f.read().strip()
        try:
            out.append(json.loads(text))
        except ValueError:  # a run that died half-way: report it as not run
            print(f"plot: {path} is not valid JSON; ignored")
    return out


def median(runs, key):
    return statistics.median(r[key] for r in runs) if runs else None


def fmt(value, digits=2):
    if value is None:
        return "-"
    if isinstance(value, float) and value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def quantile(point, key, q):
    """A run's quantile, or "-" where it had too few OK calls for one (10 above it)."""
    return "-" if point.get("ok", 0) * (1 - q) < 10 - 1e-9 else fmt(point[key], 3)


def fmt_time(value, unit):
    ns = value * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
    for limit, name, scale in ((1e3, "ns", 1), (1e6, "us", 1e3), (1e9, "ms", 1e6)):
        if ns < limit:
            return f"{ns / scale:.3g} {name}"
    return f"{ns / 1e9:.3g} s"


def closed_table(data, run):
    lines = [
        f"### Through gRPC, closed loop, concurrency {run['concurrency']}",
        "",
        f"`fuserank-bench --concurrency={run['concurrency']}`: median of {run['repeats']} runs of "
        f"{run['duration']} s (each after {run['warmup']} s of warm-up), top_k 10, one id per "
        "feature, Zipf 1.05 ids. The two services ran one after the other, never together. "
        "qps: OK answers that arrived inside the window; calls: OK calls of the median run "
        "(the percentiles' sample).",
        "",
        "| candidates | fuserank qps | calls | p50 ms | p99 ms | PyTorch peer qps | calls | p50 ms | p99 ms "
        "| qps ratio fuserank / peer |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    sizes = sorted({n for sizes in data.values() for n in sizes})
    for n in sizes:
        cells = [str(n)]
        qps = {}
        for system in ("fuserank", "torch"):
            runs = data.get(system, {}).get(n, {}).get("closed", [])
            qps[system] = median(runs, "qps")
            calls = median(runs, "ok")
            p99 = median(runs, "p99_ms") if calls and calls * 0.01 >= 10 else None
            cells += [fmt(qps[system], 1), fmt(calls, 0), fmt(median(runs, "p50_ms"), 3), fmt(p99, 3)]
        ratio = qps["fuserank"] / qps["torch"] if qps["fuserank"] and qps["torch"] else None
        cells.append(f"{ratio:.1f}x" if ratio else "-")
        lines.append("| " + " | ".join(cells) + " |")
    errors = sum(r["errors"] for s in data.values() for runs in s.values() for r in runs["closed"])
    lines += ["", f"Errors in these runs: {errors}."]
    return lines


def open_table(data, run):
    lines = [
        "### Latency against throughput (open loop)",
        "",
        f"`fuserank-bench --rate=R`: Poisson arrivals at fractions of each service's closed-loop "
        f"throughput, {run['sweep_duration']} s per point after {run['sweep_warmup']} s of warm-up, "
        "latency counted from each request's scheduled send time (no coordinated omission), "
        "2 s deadline. Answered OK /s counts OK answers that arrived inside the window; calls "
        "is the number of OK calls sent in it (the percentiles' sample); a percentile with "
        "fewer than 10 calls above it is not printed (\"-\": it would be the maximum).",
        "",
        "![p50 and p99 latency against answered OK per second](img/cpu_latency_throughput.png)",
        "",
        "| service | candidates | offered /s | answered OK /s | calls | p50 ms | p99 ms | p99.9 ms | max ms | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for system in sorted(data):
        for n in sorted(data[system]):
            for p in data[system][n]["open"]:
                lines.append(f"| {NAMES.get(system, system)} | {n} | {fmt(p['rate'], 1)} | {fmt(p['qps'], 1)} "
                             f"| {p.get('ok', '-')} | {fmt(p['p50_ms'], 3)} | {quantile(p, 'p99_ms', 0.99)} "
                             f"| {quantile(p, 'p999_ms', 0.999)} | {fmt(p.get('max_ms'), 3)} | {p['errors']} |")
    return lines


def engine_runs(results):
    """{candidates: median ms} of BM_EngineRun at one thread on the process's own code path."""
    rows = load(os.path.join(results, "microbench.json"))
    out = {}
    for b in rows[0].get("benchmarks", []) if rows else []:
        # isa:0 is the process's own choice of code path (isa:1, isa:2 force AVX2, AVX-512).
        m = re.match(r"BM_EngineRun/candidates:(\d+)/threads:1(/isa:0)?(/real_time)?$",
                     b.get("run_name", b["name"]))
        if m and b.get("aggregate_name", "median") == "median":
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
            out[int(m.group(1))] = b["real_time"] * scale
    return out


def forward_table(results):
    rows = load(os.path.join(results, "torch_forward.json"))
    if not rows:
        return []
    f = rows[0]
    engine = engine_runs(results)
    lines = [
        "### Forward alone, no gRPC, one thread",
        "",
        f"`bench/peers/torch_forward_bench.py`: PyTorch {f['torch']} eager, {f['threads']} thread "
        "(OpenBLAS), on pre-decoded batches, median of the timed iterations; `decode` is the "
        "peer's Python conversion of a RankRequest into tensors, which its service also pays. "
        "fuserank: `BM_EngineRun/.../threads:1` of the microbenchmarks below (Backend::Run on "
        "a decoded batch, median of 3 repetitions). Both sides cycle a few pre-built batches "
        f"(16 for fuserank, {f.get('pool', 32)} for the peer: not the same pool), so both are "
        "**warm-cache** figures: the rows they read stay in L2/L3, unlike a server's traffic.",
        "",
        "| candidates | torch forward ms (p10 - p90) | torch candidates/s | Python decode ms "
        "| fuserank engine ms (warm cache) | fuserank candidates/s | speed-up |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in f["results"]:
        n = r["candidates"]
        ms = engine.get(n)
        ours = (f"{ms:.3f} | {n / ms * 1e3:,.0f} | {r['forward_ms'] / ms:.1f}x" if ms else "- | - | -")
        lines.append(f"| {n} | {r['forward_ms']:.3f} ({r['forward_p10_ms']:.3f} - "
                     f"{r['forward_p90_ms']:.3f}) | {r['candidates_per_s']:,.0f} | {r['decode_ms']:.3f} "
                     f"| {ours} |")
    return lines


def targets_table(data, results):
    """The CPU suite's targets against this run's figures."""
    engine = engine_runs(results)
    rows = []

    def verdict(ok, short):
        return "met" if ok else f"not met ({short})"

    if 256 in engine:
        cps = 256 / engine[256] * 1e3
        rows.append(("engine, 1 thread, 256 candidates (warm cache: 16 batches cycled)", ">= 80,000 candidates/s", f"{cps:,.0f} candidates/s",
                     verdict(cps >= 80000, f"{cps / 80000:.0%} of the target")))
    if 16 in engine:
        ms = engine[16]
        rows.append(("engine, 1 thread, 16 candidates (warm cache: 16 batches cycled)", "<= 0.25 ms", f"{ms:.3f} ms",
                     verdict(ms <= 0.25, f"{ms / 0.25:.1f}x the allowed time")))
    for n in (16, 256):
        ours = median(data.get("fuserank", {}).get(n, {}).get("closed", []), "qps")
        peer = median(data.get("torch", {}).get(n, {}).get("closed", []), "qps")
        if ours and peer:
            ratio = ours / peer
            rows.append((f"service through gRPC, {n} candidates, concurrency 4", ">= 10x the peer's qps",
                         f"{ratio:.1f}x", verdict(ratio >= 10, f"{ratio / 10:.0%} of the target")))
    if not rows:
        return []
    lines = ["### CPU suite targets", "", "| what | target | this run | |", "| --- | --- | ---: | --- |"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    lines += ["", "No heap allocation per request after warm-up is checked by a test, not here."]
    return lines


def micro_table(results):
    rows = load(os.path.join(results, "microbench.json"))
    if not rows:
        return ["### Engine microbenchmarks", "",
                "None: `fuserank-microbench` was missing or failed (bench/out/logs/microbench.log)."]
    lines = [
        "### Engine microbenchmarks (warm cache)",
        "",
        "`fuserank-microbench`: Google Benchmark, median of 3 repetitions, one thread unless "
        "the name says otherwise. `BM_EngineRun`, `BM_EngineRunHot`, `BM_EngineLookup` and "
        "`BM_EngineRunPrecision` cycle 16 pre-built batches (bench/engine_bench_env.h), whose "
        "rows stay in L2/L3: warm-cache figures, not a server's cost on cold rows.",
        "",
        "| benchmark | time | CPU time | items/s |",
        "| --- | ---: | ---: | ---: |",
    ]
    for b in rows[0].get("benchmarks", []):
        if b.get("aggregate_name", "median") != "median":
            continue
        unit = b.get("time_unit", "ns")
        items = b.get("items_per_second")
        lines.append(f"| `{b.get('run_name', b['name'])}` | {fmt_time(b['real_time'], unit)} | "
                     f"{fmt_time(b['cpu_time'], unit)} | {fmt(items, 0) if items else '-'} |")
    return lines
