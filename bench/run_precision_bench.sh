#!/usr/bin/env bash
# engine.cpu_precision: bf16 beside fp32 (docs/cpu-engine.md, "Reduced precision"):
#  1. the score error: the bench model served twice, fp32 and bf16, asked the same
#     REQUESTS requests (fuserank-score-compare: four shapes of 16 to 1000 candidates,
#     every candidate ranked): the largest |score difference| and the ranking positions
#     that name another candidate (order_mismatches beyond 1e-6, near_tie_swaps within);
#  2. the speed: BM_PeakBf16Dot beside BM_PeakFma, BM_EngineMlpPrecision and
#     BM_EngineRunPrecision, one thread, medians of REPS repetitions of CPU time.
# Where the CPU cannot run bf16 it says why and exits 0.
# usage: [BUILD=build] [REQUESTS=10000] [REPS=5] bench/run_precision_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
REQUESTS=${REQUESTS:-10000} REPS=${REPS:-5}
MODEL=bench/out/model/bench.yaml
OUT=bench/out/precision
PY=/usr/bin/python3
mkdir -p "$OUT"
echo "bench/run_precision_bench.sh: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)," \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load average $(cut -d' ' -f1-3 /proc/loadavg)"
[[ -f $MODEL ]] || bash bench/models/gen_bench_model.sh "$BUILD/bin/fuserank-gen-model" "$MODEL"
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
# start_server NAME PRECISION: prints the port once the server answers.
start_server() {
  local port
  port=$(free_port)
  cat >"$OUT/$1.yaml" <<YAML
# Written by bench/run_precision_bench.sh.
server: {listen: "127.0.0.1:$port", admin_listen: "", metrics_listen: ""}
engine: {device: cpu, cpu_precision: $2}
model: {path: $MODEL}
logging: {level: warn}
YAML
  "$BUILD/bin/fuserank-server" --config "$OUT/$1.yaml" >"$OUT/$1.log" 2>&1 &
  PIDS+=($!)
  local pid=$!
  for _ in $(seq 600); do
    kill -0 "$pid" 2>/dev/null || { tail -n5 "$OUT/$1.log" >&2; return 1; }
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
    sleep 0.2
  done
  return 1
}
# (a config is read from a regular file only: a pipe would be refused as such)
printf 'engine: {cpu_precision: bf16}\nmodel: {path: %s}\n' "$MODEL" >"$OUT/check.yaml"
if ! "$BUILD/bin/fuserank-server" --check-config "$OUT/check.yaml" >"$OUT/check.log" 2>&1; then
  echo "bf16 does not run here: $(cat "$OUT/check.log")"
  exit 0
fi
FP32=$(start_server fp32 fp32)
BF16=$(start_server bf16 bf16)
grep -h "bf16" "$OUT/bf16.log" || true
"$BUILD/bin/fuserank-score-compare" --test="127.0.0.1:$BF16" --reference="127.0.0.1:$FP32" \
  --model="$MODEL" --label=bf16_vs_fp32 --requests="$REQUESTS" --tolerance=1e-6 \
  --timeout_ms=60000 | tee "$OUT/compare.json" || true  # exit 1: differences, reported
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
"$BUILD/bin/fuserank-microbench" --benchmark_filter='BM_PeakFma/isa:2|Precision|PeakBf16' \
  --benchmark_repetitions="$REPS" --benchmark_min_time=0.2 --benchmark_out_format=json \
  --benchmark_out="$OUT/micro.json" >/dev/null
"$PY" - "$OUT/micro.json" <<'PY'
import json, statistics, sys
runs = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("run_type") == "iteration" and not b.get("error_occurred"):
        runs.setdefault(b["run_name"], []).append(b)
for name, bs in runs.items():
    line = f"{name:44} n={len(bs)} cpu={statistics.median(b['cpu_time'] for b in bs):9.1f}{bs[0]['time_unit']}"
    for counter in ("GFLOPs", "of_peak", "of_fp32_peak", "dnn_us"):
        if counter in bs[0]:
            line += f" {counter}={statistics.median(b[counter] for b in bs):.3g}"
    print(line + " " + bs[0].get("label", ""))
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
