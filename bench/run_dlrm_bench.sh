#!/usr/bin/env bash
# The MLPerf DLRM-v2 anchor on the CPU, run by `make bench` (bench/run_cpu_bench.sh):
# fuserank-gen-model --preset=dlrm_v2 (rows scaled by ROW_SCALE), then fuserank-server
# (engine.device: cpu), the PyTorch peer (bench/peers/torch_peer.py) and, where the peers'
# venv exists (BUILD/venv-peers, made by `make bench-peers`), the ONNX Runtime peer
# (bench/peers/ort_peer.py on the model exported by tools/fuserank_onnx_export.py), one at a time,
# each driven by fuserank-bench in a closed loop at SIZE candidates per request (one
# candidate = one DLRM-v2 sample). Scores are compared first. Writes bench/out/dlrm/*.json
# and the generated section of docs/benchmarks.md between the dlrm-bench markers.
#
# usage: bench/run_dlrm_bench.sh
# env:   BUILD=build ROW_SCALE=0.01 SIZE=256 CONCURRENCY=2 DURATION=10 WARMUP=3 REPEATS=3
#        SYSTEMS="fuserank torch ort" WRITE_DOCS=1
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
PY=/usr/bin/python3
OUT=bench/out/dlrm
MODEL=$OUT/model/dlrm_v2.yaml
ROW_SCALE=${ROW_SCALE:-0.01}
SIZE=${SIZE:-256}
CONCURRENCY=${CONCURRENCY:-2}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
REPEATS=${REPEATS:-3}
SYSTEMS=${SYSTEMS:-fuserank torch ort}
VPY=$BUILD/venv-peers/bin/python
ONNX=$OUT/model/dlrm_v2.onnx
WRITE_DOCS=${WRITE_DOCS:-1}
BENCH=$BUILD/bin/fuserank-bench
SERVER=$BUILD/bin/fuserank-server
GEN=$BUILD/bin/fuserank-gen-model

for f in "$BENCH" "$SERVER" "$GEN"; do
  [[ -x "$f" ]] || { echo "run_dlrm_bench: $f is missing: build first (make build)" >&2; exit 1; }
done
rm -rf "$OUT/results" "$OUT/logs"
mkdir -p "$OUT/results" "$OUT/logs" "$OUT/model"
COMMANDS=$OUT/results/commands.txt
: >"$COMMANDS"
log() { echo "run_dlrm_bench: $*" >&2; }
logged() {
  echo "$*" >>"$COMMANDS"
  "$@"
}
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_port() {  # PID PORT: until it listens (loading a 1 GiB model takes a while)
  for _ in $(seq 1500); do
    kill -0 "$1" 2>/dev/null || return 1
    if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  return 1
}
stop() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
log "generating the DLRM-v2 model (row scale $ROW_SCALE)"
logged "$GEN" --out="$MODEL" --name=dlrm_v2 --seed=4 --preset=dlrm_v2 --row_scale="$ROW_SCALE" >&2

# ONNX Runtime where the peers' venv has it: the model exported once (its absence is noted
# in the report, not an error).
if [[ " $SYSTEMS " == *" ort "* ]]; then
  if [[ ! -x $VPY ]] || ! "$VPY" -c 'import onnxruntime' 2>/dev/null; then
    log "no ONNX Runtime in $BUILD/venv-peers (make bench-peers creates it): the ort peer is not run"
    echo "ONNX Runtime peer: not run ($BUILD/venv-peers has no onnxruntime; make bench-peers creates it)" >"$OUT/results/ort_note.txt"
    SYSTEMS=${SYSTEMS/ort/}
  elif ! logged "$VPY" tools/fuserank_onnx_export.py --model="$MODEL" --out="$ONNX" \
    >"$OUT/logs/onnx_export.log" 2>&1; then
    log "tools/fuserank_onnx_export.py failed: see $OUT/logs/onnx_export.log"
    echo "ONNX Runtime peer: not run (export failed: $(tail -n1 "$OUT/logs/onnx_export.log"))" >"$OUT/results/ort_note.txt"
    SYSTEMS=${SYSTEMS/ort/}
  fi
fi

start() {  # SYSTEM: sets PID and PORT
  PORT=$(free_port)
  if [[ "$1" == ort ]]; then
    echo "$VPY bench/peers/ort_peer.py --model=$MODEL --onnx=$ONNX --listen=127.0.0.1:$PORT --threads=1 --workers=2" >>"$COMMANDS"
    "$VPY" bench/peers/ort_peer.py --model="$MODEL" --onnx="$ONNX" --listen="127.0.0.1:$PORT" \
      --threads=1 --workers=2 >>"$OUT/logs/ort-peer.log" 2>&1 &
  elif [[ "$1" == fuserank ]]; then
    cat >"$OUT/results/fuserank-server.yaml" <<YAML
# Written by bench/run_dlrm_bench.sh.
server: {listen: "127.0.0.1:$PORT", admin_listen: "127.0.0.1:$(free_port)",
         metrics_listen: "127.0.0.1:$(free_port)"}
engine: {device: cpu}
model: {path: $MODEL}
logging: {level: warn}
YAML
    echo "$SERVER --config $OUT/results/fuserank-server.yaml" >>"$COMMANDS"
    "$SERVER" --config "$OUT/results/fuserank-server.yaml" >>"$OUT/logs/fuserank-server.log" 2>&1 &
  else
    echo "$PY bench/peers/torch_peer.py --model=$MODEL --listen=127.0.0.1:$PORT --threads=1 --workers=2" >>"$COMMANDS"
    "$PY" bench/peers/torch_peer.py --model="$MODEL" --listen="127.0.0.1:$PORT" --threads=1 \
      --workers=2 >>"$OUT/logs/torch-peer.log" 2>&1 &
  fi
  PID=$!
  PIDS+=("$PID")
  if ! wait_port "$PID" "$PORT"; then
    log "$1 did not start (logs: $OUT/logs)"
    stop "$PID"
    return 1
  fi
}

if start fuserank; then
  F_PID=$PID F_PORT=$PORT
  if [[ " $SYSTEMS " == *" torch "* ]] && start torch; then
    logged "$PY" bench/peers/compare_scores.py --model="$MODEL" --a="127.0.0.1:$F_PORT" \
      --b="127.0.0.1:$PORT" --sizes=1,16 --requests=3 --bag=1 --tolerance=1e-4 --json \
      >"$OUT/logs/compare.log" 2>&1 || log "fuserank and the peer disagree: see $OUT/logs/compare.log"
    tail -n1 "$OUT/logs/compare.log" >"$OUT/results/compare.json"
    stop "$PID"
  fi
  if [[ " $SYSTEMS " == *" ort "* ]] && start ort; then
    logged "$PY" bench/peers/compare_scores.py --model="$MODEL" --a="127.0.0.1:$F_PORT" \
      --b="127.0.0.1:$PORT" --sizes=1,16 --requests=3 --bag=1 --tolerance=1e-4 --json \
      >"$OUT/logs/compare_ort.log" 2>&1 || log "fuserank and the ONNX Runtime peer disagree: see $OUT/logs/compare_ort.log"
    tail -n1 "$OUT/logs/compare_ort.log" >"$OUT/results/compare_ort.json"
    stop "$PID"
  fi
  stop "$F_PID"
fi

for system in $SYSTEMS; do
  start "$system" || continue
  for r in $(seq "$REPEATS"); do
    if out=$(logged "$BENCH" --model="$MODEL" --target="127.0.0.1:$PORT" --candidates="$SIZE" \
      --concurrency="$CONCURRENCY" --duration="$DURATION" --warmup="$WARMUP" --seed="$r" \
      --timeout_ms=60000 --json 2>>"$OUT/logs/fuserank-bench.err"); then
      tail -n1 <<<"$out" >"$OUT/results/${system}_r${r}.json"
    else
      log "fuserank-bench failed against $system: see $OUT/logs/fuserank-bench.err"
    fi
  done
  stop "$PID"
done

cat >"$OUT/results/run.json" <<JSON
{"date": "$(date -u +%Y-%m-%d)", "started": "$STARTED", "ended": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
 "loadavg_at_end": "$(cut -d' ' -f1-3 /proc/loadavg)", "row_scale": $ROW_SCALE, "size": $SIZE,
 "concurrency": $CONCURRENCY, "duration": $DURATION, "repeats": $REPEATS,
 "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')",
 "cores": $(nproc), "loadavg_at_start": "$LOADAVG", "commit": "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +dirty)"}
JSON
args=(--results="$OUT/results" --model="$MODEL")
[[ "$WRITE_DOCS" == 1 ]] && args+=(--markdown=docs/benchmarks.md)
logged "$PY" bench/dlrm_report.py "${args[@]}"
