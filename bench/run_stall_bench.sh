#!/usr/bin/env bash
# Whether the door recovers after a stall: the server (CPU engine, one worker, queue 64,
# demo model) pinned to SERVER_CPU under `fuserank-bench` closed-loop load of 1,024-candidate
# requests on LOAD_CPU. Three windows of DURATION s each: before, during (the server is
# stopped with SIGSTOP for STALL_S s in its middle, then continued) and after. Two settings:
#   budget     engine.max_queue_delay_ms: 30 (refusals RESOURCE_EXHAUSTED);
#   deadlines  the default budget 0, every call with a 40 ms deadline (DEADLINE_EXCEEDED).
# A door whose wait model learnt the stall as the new normal refuses most calls in the
# "after" window; one that recovers serves about as many as before.
#
# Prints one line per window (qps, ok, refusals by code) and the JSON lines of
# fuserank-bench under bench/out/stall/.
#
# usage: bench/run_stall_bench.sh       (about 1 minute)
# env:   BUILD=build DURATION=5 STALL_S=2 CONCURRENCY=32 SERVER_CPU=0 LOAD_CPU=1
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SERVER=$BUILD/bin/fuserank-server
BENCH=$BUILD/bin/fuserank-bench
DURATION=${DURATION:-5}
STALL_S=${STALL_S:-2}
CONCURRENCY=${CONCURRENCY:-32}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
MODEL=config/models/demo.yaml
PY=/usr/bin/python3
OUT=bench/out/stall
mkdir -p "$OUT"

log() { echo "run_stall_bench: $*" >&2; }
source bench/bench_server_util.sh
bench_require "$SERVER" "$BENCH"
[[ -f "$MODEL" ]] || { log "$MODEL is missing: build first (make build)"; exit 1; }
PID=""
trap '[[ -n "$PID" ]] && { kill -CONT $PID; kill $PID; } 2>/dev/null || true' EXIT

# run SETTING WINDOW TIMEOUT_MS: one measured window; prints its line.
run() {
  taskset -c "$LOAD_CPU" "$BENCH" --target="127.0.0.1:$PORT" --model="$MODEL" \
    --candidates=1024 --concurrency="$CONCURRENCY" --duration="$DURATION" --warmup=0 \
    --timeout_ms="$3" --json >"$OUT/$1-$2.txt" 2>&1 || true
  tail -1 "$OUT/$1-$2.txt" | "$PY" -c '
import json, sys
r = json.loads(sys.stdin.read())
codes = ", ".join(f"{k} {v}" for k, v in sorted(r["errors_by_code"].items())) or "none"
qps, ok = r["qps"], r["ok"]
print(f"{sys.argv[1]:9} {sys.argv[2]:6}  qps {qps:7.1f}  ok {ok:6}  refused: {codes}")
' "$1" "$2"
}

for setting in budget deadlines; do
  PORT=$(free_port)
  delay=30 timeout=5000
  [[ $setting == deadlines ]] && delay=0 timeout=40
  cat >"$OUT/$setting.yaml" <<YAML
# Written by bench/run_stall_bench.sh.
server: {listen: "127.0.0.1:$PORT", admin_listen: "", metrics_listen: ""}
engine: {device: cpu, streams: 1, queue_capacity: 64, max_batch_wait_us: 0, max_queue_delay_ms: $delay}
model: {path: $MODEL}
logging: {level: error}
YAML
  taskset -c "$SERVER_CPU" "$SERVER" --config "$OUT/$setting.yaml" >"$OUT/$setting.log" 2>&1 &
  PID=$!
  wait_listen "$PID" "$PORT" "$OUT/$setting.log"
  run "$setting" warmup "$timeout" >/dev/null
  run "$setting" before "$timeout"
  ( sleep "$(( DURATION / 2 ))"; kill -STOP "$PID"; sleep "$STALL_S"; kill -CONT "$PID" ) &
  STALLER=$!
  run "$setting" stall "$timeout"
  wait "$STALLER"
  run "$setting" after "$timeout"
  kill "$PID"; wait "$PID" 2>/dev/null || true
  PID=""
done
