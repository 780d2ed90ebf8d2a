#!/usr/bin/env bash
# fuserank against the peers of the field from PyPI, on the bench model of run_cpu_bench.sh:
#   forward alone, one thread, 16/256/1024 candidates: fuserank-microbench's BM_EngineRun
#     against ONNX Runtime (the model exported by tools/fuserank_onnx_export.py) and
#     PyTorch 2.x eager, torch.compile and TorchScript (bench/peers/peer_forward_bench.py);
#   the lookup stage alone: BM_EngineLookup against fbgemm_gpu's CPU table-batched
#     embedding (bench/peers/fbgemm_lookup_bench.py);
#   the services through gRPC with the same fuserank-bench load: fuserank-server, the
#     PyTorch peer (bench/peers/torch_peer.py, Debian's torch) and the ONNX Runtime peer
#     (bench/peers/ort_peer.py), after the ONNX peer's scores are checked against
#     fuserank-server's (compare_scores.py, 1e-5) and the exporter against SPEC section 2
#     (bench/peers/test_onnx_export.py).
# fuserank's figures and the peers' are taken in the same run, round by round alternating,
# and the report gives medians over the rounds (CPU time of the calling thread for the
# forward and lookup figures, so that a shared machine's stolen time slices count for no
# one) with the load average. The peers come from PyPI into a venv this script creates
# ($BUILD/venv-peers: torch, fbgemm-gpu-cpu of that torch, onnxruntime, onnx); a package
# that does not install is reported, with its error, in the log and in docs/benchmarks.md,
# and fails nothing else. Writes bench/out/peers/ and the section "Peers from PyPI" of
# docs/benchmarks.md (between the peer-bench markers).
#
# usage: bench/run_peer_bench.sh          (about 8 minutes with the defaults, plus the venv)
# env:   BUILD=build  ROUNDS=3  FORWARD_SECONDS=2  SIZES="16 256"  DURATION=10  CONCURRENCY=4
#        TORCH_VERSION=2.14.*  FBGEMM_VERSION=1.9.0  QUICK=1 (short; docs left alone)
#        PARTS="forward lookup services" (a subset: $OUT/section.md, docs left alone)
#        OUT=bench/out/peers
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
PY=/usr/bin/python3
OUT=${OUT:-bench/out/peers}
LOGS=$OUT/logs
MODEL=${MODEL:-bench/out/model/bench.yaml}
VENV=$BUILD/venv-peers
ROUNDS=${ROUNDS:-3}
FORWARD_SECONDS=${FORWARD_SECONDS:-2}
SIZES=${SIZES:-16 256}
DURATION=${DURATION:-10}
CONCURRENCY=${CONCURRENCY:-4}
# fbgemm-gpu-cpu 1.9.0 is built for torch 2.14 (fbgemm_gpu/__init__.py's table).
TORCH_VERSION=${TORCH_VERSION:-2.14.*}
FBGEMM_VERSION=${FBGEMM_VERSION:-1.9.0}
PARTS=${PARTS:-forward lookup services}
WRITE_DOCS=1
[[ $PARTS == "forward lookup services" ]] || WRITE_DOCS=0
part() { [[ " $PARTS " == *" $1 "* ]]; }
if [[ "${QUICK:-0}" == 1 ]]; then
  ROUNDS=1 FORWARD_SECONDS=0.5 DURATION=3 WRITE_DOCS=0
fi
MICRO=$BUILD/bin/fuserank-microbench
SERVER=$BUILD/bin/fuserank-server
BENCH=$BUILD/bin/fuserank-bench
GEN=$BUILD/bin/fuserank-gen-model

log() { echo "run_peer_bench: $*" >&2; }
for f in "$MICRO" "$SERVER" "$BENCH" "$GEN"; do
  [[ -x "$f" ]] || { log "$f is missing: build first (make build)"; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT" "$LOGS"
COMMANDS=$OUT/commands.txt
NOTES=$OUT/notes.txt
: >"$COMMANDS"
: >"$NOTES"
logged() {
  echo "$*" >>"$COMMANDS"
  "$@"
}
note() { echo "$*" >>"$NOTES"; log "$*"; }
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
SECONDS=0
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
echo "start $(loadavg)" >"$OUT/loadavg.txt"

# --- the venv: each group of packages on its own, so one failure keeps the others. ------
VPY=$VENV/bin/python
pip_group() {  # WHAT PACKAGES...
  local what=$1 out
  shift
  if out=$("$VENV/bin/pip" install --progress-bar off "$@" 2>&1); then
    echo "$out" >>"$LOGS/pip.log"
    return 0
  fi
  echo "$out" >>"$LOGS/pip.log"
  note "pip install $* ($what) failed: $(grep -m1 -E '^ERROR' <<<"$out" || tail -n1 <<<"$out")"
  return 1
}
HAVE_VENV=0
if [[ -x $VPY ]] || "$PY" -m venv "$VENV" >>"$LOGS/pip.log" 2>&1; then
  HAVE_VENV=1
  pip_group "common" numpy pyyaml grpcio protobuf || true
  pip_group "PyTorch 2.x" "torch==$TORCH_VERSION" || true
  pip_group "ONNX Runtime" onnxruntime onnx || true
  # fbgemm-gpu-cpu declares no torch requirement: it is installed beside the torch above.
  pip_group "fbgemm" --no-deps "fbgemm-gpu-cpu==$FBGEMM_VERSION" || true
  "$VENV/bin/pip" list --format=freeze 2>/dev/null |
    grep -iE '^(torch|onnxruntime|onnx|fbgemm[-_]gpu[-_]cpu|numpy|grpcio|protobuf)==' \
      >"$OUT/versions.txt" || true
else
  note "$PY -m venv $VENV failed: $(tail -n2 "$LOGS/pip.log")"
fi
has() { [[ $HAVE_VENV == 1 ]] && "$VPY" -c "import $1" >/dev/null 2>&1; }

# --- the model, its ONNX export and the exporter's check. ---------------------------------
log "generating the bench model"
logged bash bench/models/gen_bench_model.sh "$GEN" "$MODEL" >>"$LOGS/setup.log" 2>&1
ONNX=$OUT/bench.onnx
HAVE_ONNX=0
if has onnx && has onnxruntime && has torch; then
  if logged "$VPY" tools/fuserank_onnx_export.py --model="$MODEL" --out="$ONNX" \
    >>"$LOGS/export.log" 2>&1; then
    HAVE_ONNX=1
  else
    note "tools/fuserank_onnx_export.py failed: $(tail -n1 "$LOGS/export.log")"
  fi
  if logged "$VPY" bench/peers/test_onnx_export.py >"$LOGS/test_onnx_export.log" 2>&1; then
    echo "passed: $(grep -m1 -E '^Ran ' "$LOGS/test_onnx_export.log")" >"$OUT/exporter_test.txt"
  else
    echo "FAILED: $(tail -n3 "$LOGS/test_onnx_export.log" | tr '\n' ' ')" >"$OUT/exporter_test.txt"
    note "bench/peers/test_onnx_export.py failed: see $LOGS/test_onnx_export.log"
  fi
else
  note "onnx, onnxruntime or torch is not importable in $VENV: no ONNX Runtime figures"
fi
SYSTEMS=()
[[ $HAVE_ONNX == 1 ]] && SYSTEMS+=(ort)
has torch && SYSTEMS+=(eager compiled script)

# --- forward and lookup alone, alternating with fuserank round by round. ------------------
for r in $(seq "$ROUNDS"); do
  echo "round $r $(loadavg)" >>"$OUT/loadavg.txt"
  log "round $r: fuserank-microbench (BM_EngineRun, BM_EngineLookup)"
  filter=()
  part forward && filter+=('BM_EngineRun/candidates:[0-9]+/threads:1/isa:0')
  part lookup && filter+=('BM_EngineLookup')
  ((${#filter[@]} > 0)) || break
  logged "$MICRO" --benchmark_filter="$(IFS='|'; echo "${filter[*]}")" \
    --benchmark_repetitions=3 --benchmark_min_time=0.2 --benchmark_out_format=json \
    --benchmark_out="$OUT/micro_r$r.json" >>"$LOGS/microbench.log" 2>&1 ||
    note "fuserank-microbench failed: $(tail -n2 "$LOGS/microbench.log")"
  if part forward && [[ $HAVE_ONNX == 1 ]] && ((${#SYSTEMS[@]} > 0)); then
    log "round $r: the peers' forward (${SYSTEMS[*]})"
    logged "$VPY" bench/peers/peer_forward_bench.py --model="$MODEL" --onnx="$ONNX" \
      --candidates=16,256,1024 --systems="$(IFS=,; echo "${SYSTEMS[*]}")" \
      --seconds="$FORWARD_SECONDS" --json >"$LOGS/forward_r$r.log" 2>&1 &&
      tail -n1 "$LOGS/forward_r$r.log" >"$OUT/forward_r$r.json" ||
      note "peer_forward_bench.py failed: $(tail -n2 "$LOGS/forward_r$r.log" | tr '\n' ' ')"
  fi
  if part lookup && has torch; then
    log "round $r: fbgemm lookup"
    logged "$VPY" bench/peers/fbgemm_lookup_bench.py --model="$MODEL" --candidates=16,256,1024 \
      --seconds="$FORWARD_SECONDS" --json >"$LOGS/lookup_r$r.log" 2>&1 &&
      tail -n1 "$LOGS/lookup_r$r.log" >"$OUT/lookup_r$r.json" ||
      note "fbgemm_lookup_bench.py failed: $(tail -n2 "$LOGS/lookup_r$r.log" | tr '\n' ' ')"
  fi
done

# --- the services, one at a time under load, the same fuserank-bench runs. ----------------
if part services; then
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
declare -A PORT_OF
start() {  # NAME COMMAND... (the port is in $P)
  local name=$1
  shift
  echo "$*" >>"$COMMANDS"
  "$@" >"$LOGS/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 900); do
    kill -0 "$pid" 2>/dev/null || { note "$name exited: $(tail -n3 "$LOGS/$name.log" | tr '\n' ' ')"; return 1; }
    if (exec 3<>"/dev/tcp/127.0.0.1/$P") 2>/dev/null; then PORT_OF[$name]=$P; return 0; fi
    sleep 0.2
  done
  note "$name did not listen on 127.0.0.1:$P"
  return 1
}
P=$(free_port)
cat >"$OUT/fuserank-server.yaml" <<EOF
# Written by bench/run_peer_bench.sh (as bench/run_cpu_bench.sh's).
server: {listen: "127.0.0.1:$P", admin_listen: "", metrics_listen: ""}
engine: {device: cpu}
model: {path: $MODEL}
logging: {level: warn}
EOF
start fuserank "$SERVER" --config "$OUT/fuserank-server.yaml" || true
P=$(free_port)
start torch "$PY" bench/peers/torch_peer.py --model="$MODEL" --listen="127.0.0.1:$P" \
  --threads=1 --workers=4 || true
if [[ $HAVE_ONNX == 1 ]]; then
  P=$(free_port)
  start ort "$VPY" bench/peers/ort_peer.py --model="$MODEL" --onnx="$ONNX" \
    --listen="127.0.0.1:$P" --threads=1 --workers=4 || true
fi
if [[ -n ${PORT_OF[fuserank]:-} && -n ${PORT_OF[ort]:-} ]]; then
  logged "$PY" bench/peers/compare_scores.py --model="$MODEL" --a="127.0.0.1:${PORT_OF[fuserank]}" \
    --b="127.0.0.1:${PORT_OF[ort]}" --json >"$LOGS/compare_ort.log" 2>&1 ||
    note "fuserank-server and the ONNX Runtime peer disagree: see $LOGS/compare_ort.log"
  tail -n1 "$LOGS/compare_ort.log" >"$OUT/compare_ort.json"
fi
for r in $(seq "$ROUNDS"); do
  for n in $SIZES; do
    for system in fuserank torch ort; do
      [[ -n ${PORT_OF[$system]:-} ]] || continue
      log "round $r, $n candidates: $system under fuserank-bench"
      logged "$BENCH" --target="127.0.0.1:${PORT_OF[$system]}" --model="$MODEL" --candidates="$n" \
        --concurrency="$CONCURRENCY" --duration="$DURATION" --warmup=3 --seed="$r" --json \
        >"$LOGS/bench_${system}_n${n}_r$r.log" 2>>"$LOGS/fuserank-bench.err" &&
        tail -n1 "$LOGS/bench_${system}_n${n}_r$r.log" >"$OUT/service_${system}_n${n}_r$r.json" ||
        note "fuserank-bench against $system failed ($n candidates): see $LOGS/fuserank-bench.err"
    done
  done
done
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
fi
echo "end $(loadavg)" >>"$OUT/loadavg.txt"
cat >"$OUT/run.json" <<EOF
{"started": "$STARTED", "seconds": $SECONDS, "build": "$BUILD", "rounds": $ROUNDS,
 "forward_seconds": $FORWARD_SECONDS, "duration": $DURATION, "concurrency": $CONCURRENCY,
 "commit": "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +dirty)"}
EOF
if [[ $WRITE_DOCS == 1 ]]; then
  "$PY" bench/peers/peer_report.py --out="$OUT" --docs=docs/benchmarks.md
  log "done in ${SECONDS} s: $OUT, docs/benchmarks.md"
else
  "$PY" bench/peers/peer_report.py --out="$OUT" --docs="$OUT/section.md"
  log "done in ${SECONDS} s (QUICK: docs left alone): $OUT/section.md"
fi
