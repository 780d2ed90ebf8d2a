#!/usr/bin/env bash
# Server CPU per Rank request, measured as docs/benchmarks.md's "Where the time goes" did:
# fuserank-server (CPU engine, the bench model) under fuserank-bench at N candidates,
# closed loop, concurrency 4; the server's CPU seconds from /proc/PID/stat and its decode
# stage from the fuserank_stage_duration_seconds metrics, read around each run (no
# warm-up inside a run; one warm-up run first, not reported). One JSON line per run
# (bench/kserve/report.py run), then the medians.
# usage: bench/run_rank_cpu.sh [BUILD_DIR] (env: CANDIDATES=256 DURATION=10 REPEATS=3;
# SERVER=<another build's fuserank-server> to measure it under this build's load generator).
# To compare builds, pass the same BUILD_DIR and change SERVER only: a different BUILD_DIR
# also changes fuserank-bench, so the qps would compare two load generators.
set -euo pipefail
BUILD=${1:-build}
CANDIDATES=${CANDIDATES:-256} DURATION=${DURATION:-10} REPEATS=${REPEATS:-3}
SERVER=${SERVER:-$BUILD/bin/fuserank-server}
MODEL=bench/out/model/bench.yaml
OUT=bench/out/rank_cpu
PY=/usr/bin/python3
mkdir -p "$OUT"
[[ -f $MODEL ]] || bash bench/models/gen_bench_model.sh "$BUILD/bin/fuserank-gen-model" "$MODEL"
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port) METRICS_PORT=$(free_port)
cat >"$OUT/fuserank-server.yaml" <<YAML
# Written by bench/run_rank_cpu.sh (bench/run_cpu_bench.sh's config, plus metrics).
server: {listen: "127.0.0.1:$PORT", admin_listen: "", metrics_listen: "127.0.0.1:$METRICS_PORT"}
engine: {device: cpu}
model: {path: $MODEL}
logging: {level: warn}
YAML
"$SERVER" --config "$OUT/fuserank-server.yaml" >"$OUT/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -n5 "$OUT/server.log"; exit 1; }
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.2
done
snapshot() {
  curl -s "http://127.0.0.1:$METRICS_PORT/metrics" >"$OUT/metrics.tmp" || true
  "$PY" bench/kserve/report.py snapshot --pid="$SERVER_PID" --metrics="$OUT/metrics.tmp"
}
bench() {
  "$BUILD/bin/fuserank-bench" --target="127.0.0.1:$PORT" --model="$MODEL" \
    --candidates="$CANDIDATES" --concurrency=4 --duration="$1" --warmup=0 --seed=3 --json
}
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
bench 3 >/dev/null
: >"$OUT/runs.jsonl"
for r in $(seq "$REPEATS"); do
  before=$(snapshot)
  bench "$DURATION" >"$OUT/run_$r.out"
  after=$(snapshot)
  "$PY" bench/kserve/report.py run --client=rank --candidates="$CANDIDATES" --repeat="$r" \
    --result="$OUT/run_$r" --before="$before" --after="$after" | tee -a "$OUT/runs.jsonl"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" - "$OUT/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
for key in ("qps", "cpu_ms_per_request", "decode_us", "encode_us"):
    values = [r[key] for r in runs if r.get(key) is not None]
    if values:
        print(f"median {key}: {statistics.median(values):.3f}")
PY
