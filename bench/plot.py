#!/usr/bin/python3
"""Turns bench/out/results (written by bench/run_cpu_bench.sh) into the latency-vs-
throughput PNG and the generated CPU section of docs/benchmarks.md.

  /usr/bin/python3 bench/plot.py --results=bench/out/results \
      --png=docs/img/cpu_latency_throughput.png [--markdown=docs/benchmarks.md]

The markdown section sits between BEGIN and END below and is replaced on every run;
the rest of the file is left alone (it is created when missing).
"""

import argparse
import glob
import json
import os
import platform
import re
import subprocess

import yaml

from cpu_bench_tables import (NAMES, closed_table, forward_table, load, micro_table, open_table,
                              targets_table)

BEGIN = "<!-- cpu-bench:begin -->"
END = "<!-- cpu-bench:end -->"
COLORS = {"fuserank": "tab:blue", "torch": "tab:orange"}


def collect(results):
    """{system: {candidates: {"closed": [runs], "open": [points]}}}"""
    data = {}
    for path in glob.glob(os.path.join(results, "*_n*_*.json")):
        m = re.match(r"(\w+?)_(closed|open)_n(\d+)_", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            text = f.read().strip()
        if not text:
            continue
        system, kind, n = m.group(1), m.group(2), int(m.group(3))
        data.setdefault(system, {}).setdefault(n, {"closed": [], "open": []})[kind].append(json.loads(text))
    for sizes in data.values():
        for runs in sizes.values():
            runs["open"].sort(key=lambda r: r["rate"])
    return data


def machine():
    info = {"cpu": platform.processor() or "unknown", "cores": os.cpu_count()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        fields = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        info["cpu"] = fields.get("Model name", info["cpu"])
        info["family"] = f"family {fields.get('CPU family', '?')} model {fields.get('Model', '?')}"
        info["threads_per_core"] = fields.get("Thread(s) per core", "?")
        info["flags"] = " ".join(f for f in ("avx2", "avx512f", "avx512_bf16") if f in fields.get("Flags", "").split())
        info["l3"] = fields.get("L3 cache", "?")
    except (OSError, subprocess.CalledProcessError):
        pass
    with open("/proc/meminfo") as f:
        kb = int(f.readline().split()[1])
    info["memory"] = f"{kb / 2**20:.0f} GiB"
    info["kernel"] = platform.release()
    return info


def model_summary(path):
    with open(path) as f:
        spec = yaml.safe_load(f)
    tables = spec["tables"]
    sides = {s: sum(1 for t in tables if t["side"] == s) for s in ("user", "item")}
    rows = {}
    for t in tables:
        rows[t["rows"]] = rows.get(t["rows"], 0) + 1
    dims = sorted({t["dim"] for t in tables})
    dense = spec.get("dense") or {}
    return (f"`{spec['name']}`: {len(tables)} tables ({sides['user']} user + {sides['item']} item), "
            f"dim {'/'.join(map(str, dims))}, rows "
            + ", ".join(f"{n} x {r:,}" for r, n in sorted(rows.items(), reverse=True))
            + f", {spec.get('embedding_dtype', 'fp32')}; dense {dense.get('user', 0)} user + "
            f"{dense.get('item', 0)} item; bottom MLP {'-'.join(map(str, spec.get('bottom_mlp') or []))}"
            f", `{spec['interaction']}`, top MLP {'-'.join(map(str, spec['top_mlp']))}")


def plot(data, png, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({n for sizes in data.values() for n in sizes})
    if not sizes:
        return False
    fig, axes = plt.subplots(1, len(sizes), figsize=(6.2 * len(sizes), 4.6), squeeze=False)
    for ax, n in zip(axes[0], sizes):
        for system in sorted(data):
            points = data[system].get(n, {}).get("open", [])
            if not points:
                continue
            qps = [p["qps"] for p in points]
            label = NAMES.get(system, system)
            ax.plot(qps, [p["p50_ms"] for p in points], "o-", color=COLORS.get(system), label=f"{label} p50")
            ax.plot(qps, [p["p99_ms"] for p in points], "^--", color=COLORS.get(system), label=f"{label} p99")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("OK answers per second inside the window (open loop, Poisson arrivals)")
        ax.set_ylabel("latency (ms, from the scheduled send)")
        ax.set_title(f"{n} candidates per request")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(png) or ".", exist_ok=True)
    fig.savefig(png, dpi=110)
    return True


def section(results, model):
    data = collect(results)
    run = load(os.path.join(results, "run.json"))[0]
    m = machine()
    loadavg = ""
    path = os.path.join(results, "loadavg.txt")
    if os.path.exists(path):
        with open(path) as f:
            loadavg = "; ".join(line.strip() for line in f if line.strip())
    with open(os.path.join(results, "commands.txt")) as f:
        commands = f.read().strip()
    try:
        c = load(os.path.join(results, "compare.json"))[0]
        agreement = (f"- Same answers: before timing, both services scored the same "
                     f"{c['candidates_compared']} candidates (bags of {c['bag']} ids, "
                     f"`bench/peers/compare_scores.py`): largest score difference "
                     f"{c['max_abs_score_diff']:.2g}, {c['order_mismatches']} responses ordered "
                     "differently.")
    except (IndexError, KeyError, ValueError):
        agreement = "- Same answers: not checked (one of the services did not run)."
    start_load = [float(x) for x in re.findall(r": ([\d.]+) ", loadavg)[:1]]
    busy = []
    if start_load and start_load[0] > 0.5 * (os.cpu_count() or 1):
        busy = [f"**The machine was busy when this ran (load average {start_load[0]:.1f} on "
                f"{os.cpu_count()} cores before the suite started): the figures below are noisy and "
                "low for both services. Rerun `make bench` on a quiet machine before quoting them.**", ""]
    if run.get("nice", 0) < 0:
        busy += [f"The suite ran at nice {run['nice']} (ahead of the other work on the machine).", ""]
    lines = [
        BEGIN,
        "",
        *busy,
        f"_Generated by `BUILD={run.get('build', 'build')} bench/run_cpu_bench.sh` (what `make bench` "
        f"runs, with its BUILD; {run['seconds']} s) on {run['started']}, commit {run['commit']} (of the "
        "tree; the binaries are those of BUILD). Rerun to replace; do not edit by hand._",
        "",
        f"- Machine: {m['cpu']} ({m.get('family', '')}), {m['cores']} cores, "
        f"{m.get('threads_per_core', '?')} thread(s) per core, L3 {m.get('l3', '?')}, {m['memory']} RAM, "
        f"{m.get('flags', '')}; Linux {m['kernel']}.",
        f"- Load average {loadavg or 'not recorded'} (1, 5, 15 minutes; other work on the "
        "machine shows here).",
        f"- Model: {model_summary(model)}.",
        agreement,
        "- fuserank-server: the config at the end of this section (`engine.device: cpu`, other "
        "engine keys at their defaults unless it says otherwise); the PyTorch peer: `bench/peers/torch_peer.py "
        "--threads=1 --workers=4` (torch intra-op and OpenBLAS threads 1, 4 gRPC handler threads).",
        "- fuserank-bench runs on the same 2 cores as the service it drives, so every service "
        "figure includes the client's share of the CPU.",
        "",
    ]
    lines += targets_table(data, results) + [""]
    lines += closed_table(data, run) + [""] + open_table(data, run) + [""]
    lines += forward_table(results) + [""] + micro_table(results) + [""]
    lines += ["### Commands, as run", "", "```sh", commands, "```", ""]
    config = os.path.join(results, "fuserank-server.yaml")
    if os.path.exists(config):
        with open(config) as f:
            lines += ["The fuserank-server config (`--config`):", "", "```yaml", f.read().strip(), "```", ""]
    lines.append(END)
    return "\n".join(lines) + "\n"


HEADER = """# Benchmarks

Most figures here come from a script in `bench/` that anyone can rerun; each suite writes
its own section between its own markers, so a rerun replaces that section and nothing
else. Figures that cannot be rerun as they stand (scratch or temporary builds, runs made by
hand) are labelled where they are. Speed is reported as medians and ratios where a figure
was repeated, never asserted in tests; a minimum, or a single run, says so beside it.

## CPU suite: fuserank against a PyTorch peer (`make bench`)

`make bench` installs the benchmark packages (PyTorch, OpenBLAS, matplotlib from Debian),
builds, and runs `bench/run_cpu_bench.sh`: it generates the bench model
(`bench/models/gen_bench_model.sh`), serves it with `fuserank-server` (`engine.device: cpu`)
and then with the PyTorch reference service `bench/peers/torch_peer.py` (same proto, same
model files, checked against SPEC section 2 by `bench/peers/test_torch_peer.py`), drives each
in turn with `fuserank-bench`, and runs the engine microbenchmarks and the torch forward
alone. `QUICK=1 bench/run_cpu_bench.sh` is a shorter smoke run that leaves this file alone.

How the figures are made:
- **Load.** `fuserank-bench` (bench/loadgen) is a C++ gRPC client on the async generic API.
  It reads the model spec and pre-builds a pool of distinct requests (512 by default,
  serialized once and cycled, so request building is never timed): ids Zipf-distributed
  (exponent 1.05, rejection-inversion sampling, ranks scattered over each table's rows so
  the hot rows are not contiguous), one id per feature, dense floats uniform in [0, 1),
  top_k 10. Closed loop (`--concurrency`) keeps C calls in flight; open loop (`--rate`)
  sends at Poisson arrival times and times every call from its *scheduled* send, so a
  server that falls behind cannot hide its queue (no coordinated omission). Latencies go
  into a log-linear histogram (exact below 512 ns, 256 buckets per power of two above:
  percentiles within 0.4 %). Every response is checked (item count, scores sorted in
  [0, 1]); a bad one counts as an error `BAD_RESPONSE`.
- **The bench model**: 26 sparse features, 8 user + 18 item, dim 32; 13 tables
  of 200,000 rows (4 user, 9 item) and 13 of 1,000 rows (4 user, 9 item); 13 dense
  (5 user + 8 item); bottom MLP 64-32, `dot`, top MLP 256-128-1; fp32 (335 MB of tables).
  Generated, seeded, by `bench/models/gen_bench_model.sh`.
- **The peer** is a straightforward PyTorch service, not a strawman: the user-side bags
  are pooled once per request and broadcast, item bags go through one `nn.EmbeddingBag`
  call per table, the dot interaction is one `bmm` over the stacked vectors, torch eager
  under `inference_mode`, OpenBLAS sgemm (about 100 GFLOP/s on one core of this CPU).
  Its forward alone is measured separately (`bench/peers/torch_forward_bench.py`); earlier runs
  quoted 2.0 ms (16 candidates) and 6.8 ms (256) for a PyTorch forward on this machine
  kind, and the table below gives what this peer takes here.
- **Isolation.** The machine has 2 cores; the two services run one after the other, and
  the load generator shares the cores with whichever one it drives. The load average
  before each service's runs is recorded: anything else running shows there.

"""


def write_markdown(path, text):
    if os.path.exists(path):
        with open(path) as f:
            doc = f.read()
    else:
        doc = HEADER + BEGIN + "\n" + END + "\n"
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        doc = head + text.rstrip("\n") + tail
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    with open(path, "w") as f:
        f.write(doc)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", default="bench/out/results")
    p.add_argument("--png", default="docs/img/cpu_latency_throughput.png")
    p.add_argument("--markdown", default="", help="docs/benchmarks.md to update (empty: none)")
    p.add_argument("--model", default="bench/out/model/bench.yaml")
    args = p.parse_args()
    data = collect(args.results)
    m = machine()
    title = f"fuserank vs PyTorch eager peer through gRPC: {m['cpu']}, {m['cores']} cores"
    if plot(data, args.png, title):
        print(f"plot: wrote {args.png}")
    else:
        print("plot: no open-loop results, no PNG")
    if args.markdown:
        write_markdown(args.markdown, section(args.results, args.model))
        print(f"plot: updated {args.markdown}")


if __name__ == "__main__":
    main()
