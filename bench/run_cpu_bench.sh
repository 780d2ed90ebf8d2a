#!/usr/bin/env bash
# The CPU benchmark suite, run by `make bench`: fuserank-server (engine.device:
# cpu) and the PyTorch peer (bench/peers/torch_peer.py) serve the same bench model and are
# driven by the same fuserank-bench load, ONE AT A TIME (this box has 2 cores: a service
# running beside the other would steal its CPU). Then the engine microbenchmarks and the
# torch forward alone. Writes bench/out/*.json, docs/img/cpu_latency_throughput.png and
# the generated section of docs/benchmarks.md (between the cpu-bench markers). Last, the
# goodput-under-overload section (bench/run_overload_bench.sh, its own markers), what a
# refusal costs (bench/run_refusal_floor.sh, its own markers), the door after a stall
# (bench/run_stall_bench.sh, printed only), the storage: redis section (bench/run_remote_bench.sh, its own markers), the KServe v2
# section through Triton's perf_analyzer (bench/run_kserve_bench.sh, its own markers),
# the peers from PyPI: ONNX Runtime, PyTorch 2.x, fbgemm (bench/run_peer_bench.sh, its own)
# and the MLPerf DLRM-v2 anchor (bench/run_dlrm_bench.sh, its own markers).
#
# usage: bench/run_cpu_bench.sh            (from anywhere; about 25 minutes on 2 cores: the
#        CPU part 7 (422 s measured), the other benches above about 16 more)
# env:   BUILD=build  DURATION=10 WARMUP=3 REPEATS=3  CONCURRENCY=4  SIZES="16 256"
#        SWEEP_DURATION=6 SWEEP_WARMUP=2 FRACTIONS="0.1 0.3 0.5 0.7 0.9"  MICRO_MIN_TIME=0.2
#        SYSTEMS="fuserank torch"  ENGINE="{device: cpu, cpu_threads: 2}"
#        QUICK=1 (a shorter smoke run, several minutes: the other benches still run; leaves
#        docs/benchmarks.md alone)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
PY=/usr/bin/python3
OUT=bench/out
LOGS=$OUT/logs
MODEL=$OUT/model/bench.yaml
BENCH=$BUILD/bin/fuserank-bench
SERVER=$BUILD/bin/fuserank-server
GEN=$BUILD/bin/fuserank-gen-model
MICRO=$BUILD/bin/fuserank-microbench
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
REPEATS=${REPEATS:-3}
CONCURRENCY=${CONCURRENCY:-4}
SIZES=${SIZES:-16 256}
SWEEP_DURATION=${SWEEP_DURATION:-6}
SWEEP_WARMUP=${SWEEP_WARMUP:-2}
FRACTIONS=${FRACTIONS:-0.1 0.3 0.5 0.7 0.9}
SYSTEMS=${SYSTEMS:-fuserank torch}
MICRO_MIN_TIME=${MICRO_MIN_TIME:-0.2}  # seconds per microbenchmark repetition
ENGINE=${ENGINE:-"{device: cpu}"}  # the server config's engine section (YAML flow map)
WRITE_DOCS=1
if [[ "${QUICK:-0}" == 1 ]]; then
  DURATION=2 WARMUP=1 REPEATS=1 SWEEP_DURATION=2 SWEEP_WARMUP=1 FRACTIONS="0.3 0.9"
  MICRO_MIN_TIME=0.02
  WRITE_DOCS=0
fi

for f in "$BENCH" "$GEN"; do
  [[ -x "$f" ]] || { echo "run_cpu_bench: $f is missing: build first (make build)" >&2; exit 1; }
done
rm -rf "$OUT/results" "$LOGS"
mkdir -p "$OUT/results" "$LOGS" docs/img
COMMANDS=$OUT/results/commands.txt
: >"$COMMANDS"
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
SECONDS=0

log() { echo "run_cpu_bench: $*" >&2; }
# Runs a command and records it, as run, for the docs.
logged() {
  echo "$*" >>"$COMMANDS"
  "$@"
}
# The same for a service started with `&`: exec keeps $! the service's own pid.
logged_exec() {
  echo "$*" >>"$COMMANDS"
  exec "$@"
}
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
json_field() {  # FILE KEY
  "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# Waits until PID listens on PORT; fails when it exits or after 120 s.
wait_port() {
  local pid=$1 port=$2
  for _ in $(seq 600); do
    if ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  return 1
}
stop() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# One fuserank-bench run; its JSON line goes to FILE. Failures are logged, not fatal.
bench() {  # FILE ARGS...
  local file=$1
  shift
  local out
  if out=$(logged "$BENCH" --model="$MODEL" --json "$@" 2>>"$LOGS/fuserank-bench.err"); then
    tail -n1 <<<"$out" >"$file"
    sed '$d' <<<"$out" >&2
  else
    log "fuserank-bench failed ($*): see $LOGS/fuserank-bench.err"
  fi
}

# Closed loop at CONCURRENCY, REPEATS times, then the open-loop rate sweep, per size.
run_suite() {  # NAME TARGET
  local name=$1 target=$2 size r f rate median i
  for size in $SIZES; do
    for r in $(seq "$REPEATS"); do
      bench "$OUT/results/${name}_closed_n${size}_r${r}.json" --target="$target" \
        --candidates="$size" --concurrency="$CONCURRENCY" --duration="$DURATION" \
        --warmup="$WARMUP" --seed="$r"
    done
    median=$("$PY" - "$OUT/results" "$name" "$size" <<'EOF'
import glob, json, statistics, sys
d, name, size = sys.argv[1:]
q = [json.load(open(f))["qps"] for f in glob.glob(f"{d}/{name}_closed_n{size}_r*.json")]
print(statistics.median(q) if q else 0)
EOF
)
    if [[ "$median" == 0 ]]; then
      log "$name: no closed-loop result at $size candidates; skipping its sweep"
      continue
    fi
    i=0
    for f in $FRACTIONS; do
      i=$((i + 1))
      rate=$("$PY" -c "print(round(max(1.0, $f * $median), 1))")
      bench "$OUT/results/${name}_open_n${size}_p${i}.json" --target="$target" \
        --candidates="$size" --rate="$rate" --duration="$SWEEP_DURATION" \
        --warmup="$SWEEP_WARMUP" --timeout_ms=2000
    done
  done
}

echo "at the start: $(cut -d' ' -f1-3 /proc/loadavg)" >"$OUT/results/loadavg.txt"
log "generating the bench model"
logged bash bench/models/gen_bench_model.sh "$GEN" "$MODEL" >&2

# Starts SYSTEM (fuserank | torch) on a free loopback port: sets PID and PORT, or fails.
start() {
  local system=$1 config
  PORT=$(free_port)
  if [[ "$system" == fuserank ]]; then
    [[ -x "$SERVER" ]] || { log "$SERVER is missing: skipping fuserank"; return 1; }
    config=$OUT/results/fuserank-server.yaml
    cat >"$config" <<EOF
# Written by bench/run_cpu_bench.sh.
server: {listen: "127.0.0.1:$PORT", admin_listen: "127.0.0.1:$(free_port)",
         metrics_listen: "127.0.0.1:$(free_port)"}
engine: $ENGINE
model: {path: $MODEL}
logging: {level: warn}
EOF
    logged_exec "$SERVER" --config "$config" >>"$LOGS/fuserank-server.log" 2>&1 &
  else
    logged_exec "$PY" bench/peers/torch_peer.py --model="$MODEL" --listen="127.0.0.1:$PORT" \
      --threads=1 --workers=4 >>"$LOGS/torch-peer.log" 2>&1 &
  fi
  PID=$!
  PIDS+=("$PID")
  if ! wait_port "$PID" "$PORT"; then
    log "$system did not start listening on 127.0.0.1:$PORT (logs: $LOGS): skipping it"
    tail -n 20 "$LOGS"/*.log >&2 || true
    stop "$PID"
    return 1
  fi
  log "$system serving on 127.0.0.1:$PORT (pid $PID)"
}

# Both services answer the same requests alike before either is timed.
if start fuserank; then
  F_PID=$PID F_PORT=$PORT
  if start torch; then
    logged "$PY" bench/peers/compare_scores.py --model="$MODEL" --a="127.0.0.1:$F_PORT" \
      --b="127.0.0.1:$PORT" --json >"$LOGS/compare.log" 2>&1 ||
      log "fuserank and the peer disagree: see $LOGS/compare.log"
    tail -n1 "$LOGS/compare.log" >"$OUT/results/compare.json"
    stop "$PID"
  fi
  stop "$F_PID"
fi

# Then one service at a time.
for system in $SYSTEMS; do
  start "$system" || continue
  run_suite "$system" "127.0.0.1:$PORT"
  stop "$PID"
done

if [[ -x "$MICRO" ]]; then
  log "engine microbenchmarks"
  logged timeout 300 "$MICRO" --benchmark_min_time="$MICRO_MIN_TIME" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_out_format=json \
    --benchmark_out="$OUT/results/microbench.json" >"$LOGS/microbench.log" 2>&1 ||
    log "fuserank-microbench failed or timed out: see $LOGS/microbench.log"
else
  log "$MICRO is missing: no microbenchmarks"
fi

log "torch forward alone"
if logged "$PY" bench/peers/torch_forward_bench.py --model="$MODEL" --candidates=16,256 \
  --threads=1 --seconds=5 --json >"$LOGS/torch-forward.log" 2>&1; then
  tail -n1 "$LOGS/torch-forward.log" >"$OUT/results/torch_forward.json"
else
  log "torch_forward_bench.py failed: see $LOGS/torch-forward.log"
fi

log "goodput under overload: bench/run_overload_bench.sh"
if [[ "$WRITE_DOCS" == 1 ]]; then
  BUILD="$BUILD" MODEL="$MODEL" bash bench/run_overload_bench.sh >&2 ||
    log "run_overload_bench.sh failed: see bench/out/overload"
else
  BUILD="$BUILD" MODEL="$MODEL" DURATION=2 WARMUP=1 REPEATS=1 OPEN_REPEATS=1 WRITE_DOCS=0 \
    bash bench/run_overload_bench.sh >&2 || log "run_overload_bench.sh failed: see bench/out/overload"
fi

log "what a refusal costs: bench/run_refusal_floor.sh"
if [[ "$WRITE_DOCS" == 1 ]]; then
  BUILD="$BUILD" MODEL="$MODEL" bash bench/run_refusal_floor.sh >&2 ||
    log "run_refusal_floor.sh failed: see bench/out/refusal"
else
  BUILD="$BUILD" MODEL="$MODEL" DURATION=1 REPEATS=1 WRITE_DOCS=0 \
    bash bench/run_refusal_floor.sh >&2 || log "run_refusal_floor.sh failed: see bench/out/refusal"
fi

log "the door after a stall: bench/run_stall_bench.sh"
# Prints its windows; docs/benchmarks.md ("Goodput under overload") quotes a run.
BUILD="$BUILD" bash bench/run_stall_bench.sh >&2 || log "run_stall_bench.sh failed: see bench/out/stall"

log "storage: redis tables in a Redis Cluster: bench/run_remote_bench.sh"
# Its own section of docs/benchmarks.md (remote-bench markers).
if [[ "$WRITE_DOCS" == 1 ]]; then
  BUILD="$BUILD" bash bench/run_remote_bench.sh >&2 || log "run_remote_bench.sh failed: see bench/out/remote"
else
  BUILD="$BUILD" QUICK=1 bash bench/run_remote_bench.sh >&2 ||
    log "run_remote_bench.sh failed: see bench/out/remote"
fi

log "KServe v2 through Triton's perf_analyzer: bench/run_kserve_bench.sh"
# Its own section of docs/benchmarks.md (kserve-bench markers); it fetches perf_analyzer
# from PyPI and says so when that fails, which fails nothing else here.
if [[ "$WRITE_DOCS" == 1 ]]; then
  BUILD="$BUILD" bash bench/run_kserve_bench.sh >&2 ||
    log "run_kserve_bench.sh failed: see bench/out/kserve"
else
  BUILD="$BUILD" QUICK=1 bash bench/run_kserve_bench.sh >&2 ||
    log "run_kserve_bench.sh failed: see bench/out/kserve"
fi

log "the peers from PyPI (ONNX Runtime, PyTorch 2.x, fbgemm): bench/run_peer_bench.sh"
# Its own section of docs/benchmarks.md (peer-bench markers); its venv comes from PyPI, and
# a package that does not install is reported there, which fails nothing else here.
if [[ "$WRITE_DOCS" == 1 ]]; then
  BUILD="$BUILD" MODEL="$MODEL" bash bench/run_peer_bench.sh >&2 ||
    log "run_peer_bench.sh failed: see bench/out/peers"
else
  BUILD="$BUILD" MODEL="$MODEL" QUICK=1 bash bench/run_peer_bench.sh >&2 ||
    log "run_peer_bench.sh failed: see bench/out/peers"
fi

log "engine.cpu_precision: bf16 beside fp32: bench/run_precision_bench.sh"
# Printed to the log (docs/benchmarks.md, "CPU engine: bf16 MLP", quotes a run); it says why
# and passes where the CPU cannot run bf16.
if [[ "$WRITE_DOCS" == 1 ]]; then
  BUILD="$BUILD" bash bench/run_precision_bench.sh >&2 || log "run_precision_bench.sh failed"
else
  BUILD="$BUILD" REQUESTS=1000 REPS=1 bash bench/run_precision_bench.sh >&2 ||
    log "run_precision_bench.sh failed"
fi

log "the MLPerf DLRM-v2 anchor: bench/run_dlrm_bench.sh"
# Its own section of docs/benchmarks.md (dlrm-bench markers).
if [[ "$WRITE_DOCS" == 1 ]]; then
  BUILD="$BUILD" bash bench/run_dlrm_bench.sh >&2 || log "run_dlrm_bench.sh failed: see bench/out/dlrm"
else
  BUILD="$BUILD" ROW_SCALE=0.001 SIZE=32 DURATION=2 WARMUP=1 REPEATS=1 WRITE_DOCS=0 \
    bash bench/run_dlrm_bench.sh >&2 || log "run_dlrm_bench.sh failed: see bench/out/dlrm"
fi

cat >"$OUT/results/run.json" <<EOF
{"started": "$STARTED", "seconds": $SECONDS, "build": "$BUILD", "duration": $DURATION,
 "warmup": $WARMUP, "repeats": $REPEATS, "concurrency": $CONCURRENCY,
 "sweep_duration": $SWEEP_DURATION, "sweep_warmup": $SWEEP_WARMUP, "nice": $(nice),
 "commit": "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +dirty)"}
EOF
if [[ "$WRITE_DOCS" == 1 ]]; then
  logged "$PY" bench/plot.py --results="$OUT/results" --png=docs/img/cpu_latency_throughput.png \
    --markdown=docs/benchmarks.md
  log "done in ${SECONDS} s: $OUT/results, docs/benchmarks.md, docs/img/cpu_latency_throughput.png"
else
  logged "$PY" bench/plot.py --results="$OUT/results" --png="$OUT/results/cpu_latency_throughput.png"
  log "done in ${SECONDS} s (QUICK: docs left alone): $OUT/results"
fi
