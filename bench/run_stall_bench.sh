#!/usr/bin/env bash
# Whether the door recovers after a stall: the server (CPU engine, one worker, queue 64,
# demo model) pinned to SERVER_CPU under `fuserank-bench` closed-loop load of 1,024-candidate
# requests on LOAD_CPU. One fuserank-bench run (one process and connection, no gap between
# windows) of three DURATION s buckets: before, during (the server is stopped with SIGSTOP
# for STALL_S s about its middle, then continued) and after; calls count in the bucket of
# their start, answers per second in the bucket they arrive in. Two settings:
#   budget     engine.max_queue_delay_ms: 30 (refusals RESOURCE_EXHAUSTED);
#   deadlines  the default budget 0, every call with a 40 ms deadline (DEADLINE_EXCEEDED).
# A door whose wait model learnt the stall as the new normal refuses most calls in the
# "after" window; one that recovers serves about as many as before.
#
# Prints one line per window (answers/s, ok, not OK; the codes of the whole run) and the
# JSON lines of fuserank-bench under bench/out/stall/.
#
# usage: bench/run_stall_bench.sh       (about 1 minute)
# env:   BUILD=build DURATION=5 STALL_S=2 CONCURRENCY=32 SERVER_CPU=0 LOAD_CPU=1
#        (DURATION and STALL_S in seconds, fractions allowed; STALL_S at most DURATION)
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
# Seconds are decimals (DURATION=2.5): every sum on them is awk's, never bash's integers.
is_seconds() { [[ $1 =~ ^([0-9]+([.][0-9]*)?|[.][0-9]+)$ ]]; }
is_seconds "$DURATION" && awk -v d="$DURATION" 'BEGIN { exit !(d > 0) }' ||
  { log "DURATION must be a number of seconds > 0, not '$DURATION'"; exit 2; }
is_seconds "$STALL_S" && awk -v s="$STALL_S" -v d="$DURATION" 'BEGIN { exit !(s <= d) }' ||
  { log "STALL_S must be a number of seconds from 0 to DURATION ($DURATION), not '$STALL_S'"
    exit 2; }
seconds() { awk "BEGIN { printf \"%.17g\", $1 }"; }
source bench/bench_server_util.sh
bench_require "$SERVER" "$BENCH"
[[ -f "$MODEL" ]] || { log "$MODEL is missing: build first (make build)"; exit 1; }
PID=""
trap '[[ -n "$PID" ]] && { kill -CONT $PID; kill $PID; } 2>/dev/null || true' EXIT

# run SETTING NAME TIMEOUT_MS WINDOWS: WINDOWS buckets of DURATION s in one run; prints a
# line per bucket (before, stall, after).
run() {
  taskset -c "$LOAD_CPU" "$BENCH" --target="127.0.0.1:$PORT" --model="$MODEL" \
    --candidates=1024 --concurrency="$CONCURRENCY" --duration="$(seconds "$DURATION * $4")" \
    --bucket="$DURATION" --warmup=0 --timeout_ms="$3" --json >"$OUT/$1-$2.txt" 2>&1 || true
  tail -1 "$OUT/$1-$2.txt" | "$PY" -c '
import json, sys
r = json.loads(sys.stdin.read())
codes = ", ".join(f"{k} {v}" for k, v in sorted(r["errors_by_code"].items())) or "none"
buckets = r["buckets"]
names = ["before", "stall", "after"] if len(buckets) == 3 else [sys.argv[2]] * len(buckets)
for name, b in zip(names, buckets):
    qps, ok, bad = b["completed_ok"] / float(sys.argv[3]), b["ok"], b["errors"]
    print(f"{sys.argv[1]:9} {name:6}  qps {qps:7.1f}  ok {ok:6}  not OK {bad:6}")
print(f"{sys.argv[1]:9} whole run, not OK by code: {codes}")
' "$1" "$2" "$DURATION"
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
  run "$setting" warmup "$timeout" 1 >/dev/null
  # The run's window starts once its request pool is built and it has connected (well
  # under a second for the demo model), so the stall falls inside the middle bucket.
  ( sleep "$(seconds "$DURATION * 1.5 - $STALL_S / 2")"; kill -STOP "$PID"
    sleep "$STALL_S"; kill -CONT "$PID" ) &
  STALLER=$!
  run "$setting" windows "$timeout" 3
  wait "$STALLER"
  kill "$PID"; wait "$PID" 2>/dev/null || true
  PID=""
done
