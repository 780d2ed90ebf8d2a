#!/usr/bin/env bash
# Goodput under overload, run by `make bench` (from bench/run_cpu_bench.sh) or
# alone: fuserank-server pinned to one core, fuserank-bench pinned to another (taskset),
# the bench model at 256 candidates, engine.queue_capacity 64 (the setting the collapse was first measured with) and a
# 150 ms queue budget (engine.max_queue_delay_ms: about two batch times of this model here), 2 s deadlines. Closed-loop
# capacity first (the median of REPEATS runs at CONCURRENCY calls in flight, on a server
# with no queue budget: CAPACITY_ENGINE), then, on a server with ENGINE,
# open-loop Poisson arrivals at each of FACTORS x capacity (OPEN_REPEATS runs of each, in
# turn; the table shows the run with the median goodput and the range over all), then one
# run (one process, one connection) of 0.5x for SPIKE_BEFORE s, 6x for SPIKE s and 0.5x for
# SPIKE_AFTER s, reported in BUCKET s buckets, so the recovery after the spike is seen
# by the same sender with no gap. Every row carries the client's held sends and send lag
# (was the offered rate really sent?). Writes bench/out/overload/*.json and the section of docs/benchmarks.md
# between the overload-bench markers (WRITE_DOCS=0: neither, only the table on stdout).
#
# usage: bench/run_overload_bench.sh        (about 4 minutes)
# env:   BUILD=build  SERVER=$BUILD/bin/fuserank-server  MODEL=bench/out/model/bench.yaml
#        DURATION=10 WARMUP=3 REPEATS=3 OPEN_REPEATS=3 CONCURRENCY=64 FACTORS="0.9 1.5 3 6"
#        SERVER_CPU=0 LOAD_CPU=1  ENGINE="{device: cpu, queue_capacity: 64, max_queue_delay_ms: 150}"
#        CAPACITY_ENGINE="{device: cpu, queue_capacity: 64}"
#        SPIKE_BEFORE=2 SPIKE=3 SPIKE_AFTER=3 BUCKET=0.25
#        LABEL=""
#        WRITE_DOCS=1
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
SERVER=${SERVER:-$BUILD/bin/fuserank-server}
BENCH=${BENCH:-$BUILD/bin/fuserank-bench}
GEN=$BUILD/bin/fuserank-gen-model
MODEL=${MODEL:-bench/out/model/bench.yaml}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
REPEATS=${REPEATS:-3}
OPEN_REPEATS=${OPEN_REPEATS:-3}
CONCURRENCY=${CONCURRENCY:-64}
FACTORS=${FACTORS:-0.9 1.5 3 6}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
ENGINE=${ENGINE:-"{device: cpu, queue_capacity: 64, max_queue_delay_ms: 150}"}
CAPACITY_ENGINE=${CAPACITY_ENGINE:-"{device: cpu, queue_capacity: 64}"}
SPIKE_BEFORE=${SPIKE_BEFORE:-2}
SPIKE=${SPIKE:-3}
SPIKE_AFTER=${SPIKE_AFTER:-3}
BUCKET=${BUCKET:-0.25}
LABEL=${LABEL:-}
WRITE_DOCS=${WRITE_DOCS:-1}
PY=/usr/bin/python3
OUT=bench/out/overload
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/commands.txt

log() { echo "run_overload_bench: $*" >&2; }
source bench/bench_server_util.sh
bench_require "$SERVER" "$BENCH"
bench_model "$GEN" "$MODEL"

PID=""
trap '[[ -n "$PID" ]] && kill $PID 2>/dev/null || true' EXIT
# Starts the server pinned to SERVER_CPU with `engine: $1`, files named after $2; sets
# PORT and PID.
start_server() {
  PORT=$(free_port)
  cat >"$OUT/server-$2.yaml" <<EOF
# Written by bench/run_overload_bench.sh.
server: {listen: "127.0.0.1:$PORT", admin_listen: "", metrics_listen: ""}
engine: $1
model: {path: $MODEL}
logging: {level: warn}
EOF
  echo "taskset -c $SERVER_CPU $SERVER --config $OUT/server-$2.yaml" >>"$OUT/commands.txt"
  taskset -c "$SERVER_CPU" "$SERVER" --config "$OUT/server-$2.yaml" >"$OUT/server-$2.log" 2>&1 &
  PID=$!
  wait_listen "$PID" "$PORT" "$OUT/server-$2.log"
}
stop_server() {
  kill "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  PID=""
}

run() {  # FILE ARGS...: one fuserank-bench run on LOAD_CPU; its JSON line into FILE
  local file=$1
  shift
  echo "taskset -c $LOAD_CPU $BENCH --target=127.0.0.1:$PORT --model=$MODEL --candidates=256 --timeout_ms=2000 --json $*" >>"$OUT/commands.txt"
  taskset -c "$LOAD_CPU" "$BENCH" --target="127.0.0.1:$PORT" --model="$MODEL" --candidates=256 \
    --timeout_ms=2000 --json "$@" 2>>"$OUT/bench.err" | tail -n1 >"$file"
}

LOADAVG_START=$(cut -d' ' -f1-3 /proc/loadavg)
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# Capacity is the server's, not its admission's: measured with no queue budget (at
# CONCURRENCY in flight a budget would refuse some of the closed loop's own calls).
start_server "$CAPACITY_ENGINE" capacity
for r in $(seq "$REPEATS"); do
  run "$OUT/closed_r$r.json" --concurrency="$CONCURRENCY" --duration="$DURATION" \
    --warmup="$WARMUP" --seed="$r"
done
CAPACITY=$("$PY" - "$OUT" <<'EOF'
import glob, json, statistics, sys
q = [json.load(open(f))["qps"] for f in glob.glob(f"{sys.argv[1]}/closed_r*.json")]
print(statistics.median(q))
EOF
)
log "capacity $CAPACITY requests/s (closed loop, $CONCURRENCY in flight)"
stop_server
start_server "$ENGINE" overload
# Repeats in turn (every factor once, then again), so that a slow spell of the machine
# does not fall on one factor's runs only.
for r in $(seq "$OPEN_REPEATS"); do
  i=0
  for f in $FACTORS; do
    i=$((i + 1))
    rate=$("$PY" -c "print(round($f * $CAPACITY, 1))")
    run "$OUT/open_p${i}_r$r.json" --rate="$rate" --duration="$DURATION" --warmup="$WARMUP" \
      --seed="$r"
  done
done
# Half the capacity, the 6x spike, half the capacity again: one run, in buckets.
base=$("$PY" -c "print(round(0.5 * $CAPACITY, 1))")
spike=$("$PY" -c "print(round(6 * $CAPACITY, 1))")
run "$OUT/spike.json" --schedule="$base:$SPIKE_BEFORE,$spike:$SPIKE,$base:$SPIKE_AFTER" \
  --bucket="$BUCKET" --warmup=1 --seed=9
LOADAVG_END=$(cut -d' ' -f1-3 /proc/loadavg)
stop_server

"$PY" - "$OUT" "$CAPACITY" "$STARTED" "$LOADAVG_START" "$LOADAVG_END" "$WRITE_DOCS" \
  "$LABEL" "$ENGINE" "$CONCURRENCY" "$CAPACITY_ENGINE" "$OPEN_REPEATS" "$SPIKE_BEFORE" "$SPIKE" <<'EOF'
import glob, json, os, re, subprocess, sys
out, capacity, started, load_start, load_end, write_docs, label, engine, concurrency, capacity_engine, open_repeats, spike_before, spike_s = sys.argv[1:]
capacity = float(capacity)
spike_before, spike_s = float(spike_before), float(spike_s)
sys.path.insert(0, "bench")
from machine import cpu_model as cpu
def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None
# Per factor: the run with the median goodput (a whole row of one run), and the range.
points = {}
for path in glob.glob(f"{out}/open_p*_r*.json"):
    d = load(path)
    if d is not None:
        points.setdefault(int(re.search(r"open_p(\d+)_r", path).group(1)), []).append(d)
runs = []
for i in sorted(points):
    ds = sorted(points[i], key=lambda d: d["qps"])
    runs.append((ds[(len(ds) - 1) // 2], ds[0]["qps"] / capacity, ds[-1]["qps"] / capacity, len(ds)))
rows = []
def percentile(d, key, q):  # "-" where too few calls for the quantile (10 above it)
    return "-" if d["ok"] * (1 - q) < 10 - 1e-9 else f"{d[key]:.2f} ms"
for d, low, high, n in runs:
    factor = d["rate"] / capacity
    refused = d["errors_by_code"]
    spread = "-" if n < 2 else f"{low:.2f}-{high:.2f} ({n} runs)"
    # Not sent as scheduled: more than 1% of the sends held, or one 50 ms late.
    late = d.get("delayed_sends", 0) > 0.01 * (d["ok"] + d["errors"]) or d.get("max_send_lag_ms", 0) > 50
    rows.append((f"{factor:.1f}x" + (" (not sent on time)" if late else ""), d["rate"], d["qps"], d["qps"] / capacity, spread, d["ok"], d["p50_ms"],
                 percentile(d, "p99_ms", 0.99), d.get("refused_p99_ms"),
                 ", ".join(f"{n:,} {c}" for c, n in sorted(refused.items())) or "none",
                 d.get("delayed_sends", 0), d.get("max_send_lag_ms", 0)))
# The spike run, bucket by bucket: before, during, after. Back to baseline: the first
# bucket after the spike with no error and a p50 within 2x the median p50 of the buckets
# before the spike (a bucket holds ~100 calls: its p99 is its maximum, so not used).
spike = load(f"{out}/spike.json")
spike_lines, recovery = [], "the spike run left no result"
if spike is not None and spike.get("buckets"):
    buckets = spike["buckets"]
    before = sorted(b["p50_ms"] for b in buckets if b["start_s"] < spike_before - 1e-9)
    base_p50 = before[len(before) // 2] if before else float("nan")
    end = spike_before + spike_s
    after = [b for b in buckets if b["start_s"] >= end - 1e-9]
    first = next((b for b in after if b["errors"] == 0 and b["ok"] > 0 and b["p50_ms"] <= 2 * base_p50), None)
    if first is None:
        recovery = f"no bucket after the spike had a p50 within 2x the {base_p50:.2f} ms before it, with no error"
    else:
        recovery = (f"the first bucket with no error and a p50 within 2x the {base_p50:.2f} ms before the spike "
                    f"starts {first['start_s'] - end:.2f} s after the spike's last scheduled send (see the rows after it too)")
    spike_lines = ["| sent from (s) | offered/s | OK | not OK | OK answers in the bucket | p50 of OK | max of OK | held sends | max send lag |",
                   "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for b in buckets:
        spike_lines.append(f"| {b['start_s']:.2f} | {b['rate']:,.0f} | {b['ok']:,} | {b['errors']:,} | {b['completed_ok']:,} | "
                           f"{b['p50_ms']:.2f} ms | {b['max_ms']:.2f} ms | {b['delayed_sends']:,} | {b['max_send_lag_ms']:.1f} ms |")
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"]).returncode != 0
lines = [
    f"_Generated by bench/run_overload_bench.sh on {started}, commit {commit}{'+dirty' if dirty else ''}{', ' + label if label else ''}. Rerun to replace; do not edit by hand._",
    "",
    f"- Machine: {cpu()}, {os.cpu_count()} CPUs; server on one core and fuserank-bench on another (`taskset`); load average {load_start} at the start, {load_end} at the end (1, 5, 15 minutes; other work on the machine shows here).",
    f"- Server: `engine: {engine}`, every other key at its default; the bench model, 256 candidates per request, 2 s deadlines.",
    f"- Capacity: {capacity:,.0f} requests/s, the median closed-loop rate at {concurrency} calls in flight on the server with `engine: {capacity_engine}` (no queue budget, which would refuse some of the closed loop's own calls). Goodput is OK answers per second over it; latencies count from the scheduled send (no coordinated omission); \"refused p99\" is the p99 of RESOURCE_EXHAUSTED answers as the client saw them. Each overload row is the run with the median goodput of {open_repeats} runs made in turn (every factor once, then again), with the range of goodput over them.",
    "",
    "- Answered OK per s counts OK answers that arrived inside the measured window (calls sent in it and answered after it are not throughput). Held sends: sends the client held back at `--max_outstanding`; max send lag: the latest send behind its schedule (both counted in latency; a large lag means the offered rate was not sent on time).",
    "",
    "| offered | requests/s | answered OK per s | goodput / capacity | goodput range | OK calls | p50 of OK | p99 of OK | refused p99 | not OK | held sends | max send lag |",
    "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
]
for name, rate, qps, ratio, spread, ok, p50, p99, rp99, refused, held, lag in rows:
    rp = "-" if rp99 in (None, 0) else f"{rp99:.2f} ms"
    lines.append(f"| {name} | {rate:,.0f} | {qps:,.0f} | {ratio:.2f} | {spread} | {ok:,} | {p50:.2f} ms | {p99} | {rp} | {refused} | {held:,} | {lag:.1f} ms |")
if spike_lines:
    lines += ["", f"The spike in one run (one process and connection, no gap): 0.5x for {spike_before:g} s, 6x for {spike_s:g} s, 0.5x again; calls in the bucket of their scheduled send. Recovery: {recovery}.", ""] + spike_lines
section = "\n".join(lines) + "\n"
print(section)
if write_docs == "1":
    path = "docs/benchmarks.md"
    begin, end = "<!-- overload-bench:begin -->", "<!-- overload-bench:end -->"
    text = open(path).read()
    block = f"{begin}\n\n{section}\n{end}"
    if begin in text and end in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n## Goodput under overload\n\n" + block + "\n"
    open(path, "w").write(text)
    print(f"run_overload_bench: wrote the overload section of {path}", file=sys.stderr)
EOF
