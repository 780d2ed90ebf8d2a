#!/usr/bin/env bash
# Goodput under overload, run by `make bench` (from bench/run_cpu_bench.sh) or
# alone: fuserank-server pinned to one core, fuserank-bench pinned to another (taskset),
# the bench model at 256 candidates, engine.queue_capacity 64 (the setting the collapse was first measured with) and a
# 150 ms queue budget (engine.max_queue_delay_ms: about two batch times of this model here), 2 s deadlines. Closed-loop
# capacity first (the median of REPEATS runs at CONCURRENCY calls in flight, on a server
# with no queue budget: CAPACITY_ENGINE), then, on a server with ENGINE,
# open-loop Poisson arrivals at each of FACTORS x capacity (OPEN_REPEATS runs of each, in
# turn; the table shows the run with the median goodput and the range over all), then 0.5x
# for the first second after the 6x spike. Writes bench/out/overload/*.json and the section of docs/benchmarks.md
# between the overload-bench markers (WRITE_DOCS=0: neither, only the table on stdout).
#
# usage: bench/run_overload_bench.sh        (about 4 minutes)
# env:   BUILD=build  SERVER=$BUILD/bin/fuserank-server  MODEL=bench/out/model/bench.yaml
#        DURATION=10 WARMUP=3 REPEATS=3 OPEN_REPEATS=3 CONCURRENCY=64 FACTORS="0.9 1.5 3 6"
#        SERVER_CPU=0 LOAD_CPU=1  ENGINE="{device: cpu, queue_capacity: 64, max_queue_delay_ms: 150}"
#        CAPACITY_ENGINE="{device: cpu, queue_capacity: 64}"
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
# The spike, then the first second after it at half the capacity.
rate=$("$PY" -c "print(round(6 * $CAPACITY, 1))")
run "$OUT/spike.json" --rate="$rate" --duration=3 --warmup=0
rate=$("$PY" -c "print(round(0.5 * $CAPACITY, 1))")
run "$OUT/after.json" --rate="$rate" --duration=1 --warmup=0 --seed=9
LOADAVG_END=$(cut -d' ' -f1-3 /proc/loadavg)
stop_server

"$PY" - "$OUT" "$CAPACITY" "$STARTED" "$LOADAVG_START" "$LOADAVG_END" "$WRITE_DOCS" \
  "$LABEL" "$ENGINE" "$CONCURRENCY" "$CAPACITY_ENGINE" "$OPEN_REPEATS" <<'EOF'
import glob, json, os, platform, re, subprocess, sys
out, capacity, started, load_start, load_end, write_docs, label, engine, concurrency, capacity_engine, open_repeats = sys.argv[1:]
capacity = float(capacity)
def cpu():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
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
after = load(f"{out}/after.json")
if after is not None:
    runs.append((after, None, None, 1))
rows = []
for d, low, high, n in runs:
    factor = d["rate"] / capacity
    refused = d["errors_by_code"]
    name = "0.5x, first second after a 6x spike" if low is None else f"{factor:.1f}x"
    spread = "-" if low is None or n < 2 else f"{low:.2f}-{high:.2f} ({n} runs)"
    rows.append((name, d["rate"], d["qps"], d["qps"] / capacity, spread, d["p50_ms"], d["p99_ms"],
                 d.get("refused_p99_ms"), ", ".join(f"{n:,} {c}" for c, n in sorted(refused.items())) or "none"))
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"]).returncode != 0
lines = [
    f"_Generated by bench/run_overload_bench.sh on {started}, commit {commit}{'+dirty' if dirty else ''}{', ' + label if label else ''}. Rerun to replace; do not edit by hand._",
    "",
    f"- Machine: {cpu()}, {os.cpu_count()} CPUs; server on one core and fuserank-bench on another (`taskset`); load average {load_start} at the start, {load_end} at the end (1, 5, 15 minutes; other work on the machine shows here).",
    f"- Server: `engine: {engine}`, every other key at its default; the bench model, 256 candidates per request, 2 s deadlines.",
    f"- Capacity: {capacity:,.0f} requests/s, the median closed-loop rate at {concurrency} calls in flight on the server with `engine: {capacity_engine}` (no queue budget, which would refuse some of the closed loop's own calls). Goodput is OK answers per second over it; latencies count from the scheduled send (no coordinated omission); \"refused p99\" is the p99 of RESOURCE_EXHAUSTED answers as the client saw them. Each overload row is the run with the median goodput of {open_repeats} runs made in turn (every factor once, then again), with the range of goodput over them.",
    "",
    "| offered | requests/s | answered OK per s | goodput / capacity | goodput range | p50 of OK | p99 of OK | refused p99 | not OK |",
    "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |",
]
for name, rate, qps, ratio, spread, p50, p99, rp99, refused in rows:
    rp = "-" if rp99 in (None, 0) else f"{rp99:.2f} ms"
    lines.append(f"| {name} | {rate:,.0f} | {qps:,.0f} | {ratio:.2f} | {spread} | {p50:.2f} ms | {p99:.2f} ms | {rp} | {refused} |")
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
