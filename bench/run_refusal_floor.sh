#!/usr/bin/env bash
# What refusing one Rank call costs the server's core, against the least gRPC C++ can
# spend on it: each server pinned to one core (SERVER_CPU), `fuserank-bench` on another
# (LOAD_CPU) sending RATE calls per second (open loop) for a model no server serves, so
# every call is refused (NOT_FOUND) without computing anything:
#   fuserank-server          the whole ranking port's path to a refusal (in-flight bound,
#                            size, wire scan, model lookup) on the callback API;
#   floor, callback API      bench/refusal: a generic gRPC server that only reads the
#                            message and answers NOT_FOUND, on the callback API;
#   floor, async API         the same on the completion-queue API, one thread that polls
#                            and answers (no hand-off between threads).
# The server's CPU time (user + system, /proc/PID/stat) and context switches (all its
# threads, /proc/PID/task/*/status) over the run, per call; the median of REPEATS runs,
# made in turn. At CANDIDATES_LIST candidates per request (256: 79 KB on the wire).
#
# Prints a markdown table and writes it into docs/benchmarks.md between the refusal-floor
# markers (WRITE_DOCS=0: only prints it). Run by `make bench` after the overload bench.
#
# usage: bench/run_refusal_floor.sh     (about 1.5 minutes)
# env:   BUILD=build RATE=2500 DURATION=4 REPEATS=3 CANDIDATES_LIST="16 256"
#        SERVER_CPU=0 LOAD_CPU=1 MODEL=bench/out/model/bench.yaml WRITE_DOCS=1
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SERVER=$BUILD/bin/fuserank-server
FLOOR=$BUILD/bin/fuserank-refusal-floor
BENCH=$BUILD/bin/fuserank-bench
GEN=$BUILD/bin/fuserank-gen-model
MODEL=${MODEL:-bench/out/model/bench.yaml}
RATE=${RATE:-2500}
DURATION=${DURATION:-4}
REPEATS=${REPEATS:-3}
CANDIDATES_LIST=${CANDIDATES_LIST:-16 256}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
WRITE_DOCS=${WRITE_DOCS:-1}
PY=/usr/bin/python3
OUT=bench/out/refusal
mkdir -p "$OUT"
rm -f "$OUT"/*.txt

log() { echo "run_refusal_floor: $*" >&2; }
source bench/bench_server_util.sh
bench_require "$SERVER" "$FLOOR" "$BENCH"
bench_model "$GEN" "$MODEL"
PID=""
trap '[[ -n "$PID" ]] && kill $PID 2>/dev/null || true' EXIT

start() {  # KIND: sets PORT and PID
  PORT=$(free_port)
  case $1 in
    fuserank)
      cat >"$OUT/server.yaml" <<YAML
# Written by bench/run_refusal_floor.sh.
server: {listen: "127.0.0.1:$PORT", admin_listen: "", metrics_listen: ""}
model: {path: $MODEL}
logging: {level: error}
YAML
      taskset -c "$SERVER_CPU" "$SERVER" --config "$OUT/server.yaml" >"$OUT/server.log" 2>&1 &
      ;;
    callback) taskset -c "$SERVER_CPU" "$FLOOR" callback "$PORT" >"$OUT/server.log" 2>&1 & ;;
    async) taskset -c "$SERVER_CPU" "$FLOOR" async "$PORT" 1 >"$OUT/server.log" 2>&1 & ;;
  esac
  PID=$!
  wait_listen "$PID" "$PORT" "$OUT/server.log"
}
# CPU ticks (user + system) and context switches of PID, all threads.
usage() {
  local ticks switches=0 t
  ticks=$(awk '{print $14 + $15}' "/proc/$PID/stat")
  for t in /proc/"$PID"/task/*/status; do
    switches=$((switches + $(awk '/^(non)?voluntary_ctxt_switches/ {s += $2} END {print s}' "$t")))
  done
  echo "$ticks $switches"
}

STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
LOADAVG_START=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$REPEATS"); do
  for candidates in $CANDIDATES_LIST; do
    for kind in fuserank callback async; do
      start "$kind"
      read -r t0 c0 < <(usage)
      taskset -c "$LOAD_CPU" "$BENCH" --target="127.0.0.1:$PORT" --model="$MODEL" \
        --model_name=no-such-model --candidates="$candidates" --rate="$RATE" \
        --duration="$DURATION" --warmup=0 --timeout_ms=2000 --json --seed="$r" 2>/dev/null |
        tail -n1 >"$OUT/bench.json"
      read -r t1 c1 < <(usage)
      kill "$PID"
      wait "$PID" 2>/dev/null || true
      PID=""
      calls=$("$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["ok"] + d["errors"])' "$OUT/bench.json")
      echo "$kind $candidates $((t1 - t0)) $((c1 - c0)) $calls" >>"$OUT/runs.txt"
    done
  done
done

LOADAVG_END=$(cut -d' ' -f1-3 /proc/loadavg)

"$PY" - "$OUT/runs.txt" "$RATE" "$DURATION" "$REPEATS" "$STARTED" "$LOADAVG_START" \
  "$LOADAVG_END" "$WRITE_DOCS" "$SERVER_CPU" "$LOAD_CPU" <<'EOF'
import collections, os, re, statistics, subprocess, sys
path, rate, duration, repeats, started, load_start, load_end, write_docs, server_cpu, load_cpu = sys.argv[1:]
sys.path.insert(0, "bench")
from machine import cpu_model as cpu
tick = os.sysconf("SC_CLK_TCK")
runs = collections.defaultdict(list)
for line in open(path):
    kind, candidates, ticks, switches, calls = line.split()
    calls = max(1, int(calls))
    runs[(kind, int(candidates))].append((int(ticks) / tick / calls * 1e6, int(switches) / calls))
names = {"fuserank": "fuserank-server (its whole refusal path)",
         "callback": "floor: gRPC callback API, nothing but NOT_FOUND",
         "async": "floor: gRPC completion-queue API, one thread"}
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"]).returncode != 0
lines = [
    f"_Generated by bench/run_refusal_floor.sh on {started}, commit {commit}{'+dirty' if dirty else ''}, on {cpu()}, {os.cpu_count()} CPUs (each server on CPU {server_cpu}, fuserank-bench on CPU {load_cpu}); load average {load_start} at the start, {load_end} at the end. {int(float(rate)):,} calls/s for {duration} s per run, every one refused; median of {repeats} runs made in turn (range). Rerun to replace; do not edit by hand._",
    "",
    "| server | candidates | CPU per refused call | context switches per call |",
    "| --- | ---: | ---: | ---: |",
]
for (kind, candidates), values in sorted(runs.items(), key=lambda kv: (kv[0][1], list(names).index(kv[0][0]))):
    us = sorted(v[0] for v in values)
    cs = statistics.median(v[1] for v in values)
    lines.append(f"| {names[kind]} | {candidates} | {statistics.median(us):.0f} us ({us[0]:.0f}-{us[-1]:.0f}) | {cs:.1f} |")
section = "\n".join(lines) + "\n"
print(section)
if write_docs == "1":
    doc = "docs/benchmarks.md"
    begin, end = "<!-- refusal-floor:begin -->", "<!-- refusal-floor:end -->"
    text = open(doc).read()
    if begin in text and end in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: f"{begin}\n\n{section}\n{end}", text, flags=re.S)
        open(doc, "w").write(text)
        print(f"run_refusal_floor: wrote the refusal-floor section of {doc}", file=sys.stderr)
    else:
        print(f"run_refusal_floor: {doc} has no refusal-floor markers; not written", file=sys.stderr)
EOF
