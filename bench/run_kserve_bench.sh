#!/usr/bin/env bash
# Triton's perf_analyzer (PyPI perf-analyzer) drives fuserank-server through the KServe v2
# protocol (inference.GRPCInferenceService/ModelInfer, gRPC, no shared memory), beside
# fuserank-bench driving the same server through fuserank.v1.Ranker/Rank with the same
# load: the bench model of run_cpu_bench.sh, the same requests (fuserank-kserve-data writes
# fuserank-bench's request pool as perf_analyzer input data), the same concurrency, top_k
# 10. The two clients run one after the other, never together. Around every run the
# server's CPU time and its decode/encode stage metrics are read, so the report also says
# what each protocol costs the server per request. Writes bench/out/kserve/ and the
# section "KServe v2 (Triton protocol) through perf_analyzer" of docs/benchmarks.md
# (between the kserve-bench markers).
#
# perf_analyzer on Debian 12: PyPI has perf-analyzer only as manylinux_2_38 wheels (glibc
# 2.38, libstdc++ of GCC 13); Debian 12 has glibc 2.36, so `pip install perf-analyzer`
# picks the placeholder 0.1.0, which has no binary. This script then downloads the real
# wheel (pip download --platform manylinux_2_38_x86_64) and, when its binary does not
# start here ("GLIBC_2.38 not found"), runs it under Debian 13's glibc and libstdc++
# (apt-get download from Debian's archive into bench/out/tools, never installed): the
# binary is started by that glibc's own loader. Any step that fails is reported with its
# error, in the log and in docs/benchmarks.md.
#
# usage: bench/run_kserve_bench.sh          (about 4 minutes with the defaults)
# env:   BUILD=build  SIZES="16 256"  CONCURRENCY=4  DURATION=10 (s per run)  REPEATS=3
#        PA_VERSION=2.60.0  QUICK=1 (short runs; docs/benchmarks.md left alone)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
PY=/usr/bin/python3
OUT=bench/out/kserve
TOOLS=bench/out/tools
LOGS=$OUT/logs
MODEL=bench/out/model/bench.yaml
SIZES=${SIZES:-16 256}
CONCURRENCY=${CONCURRENCY:-4}
DURATION=${DURATION:-10}
REPEATS=${REPEATS:-3}
PA_VERSION=${PA_VERSION:-2.60.0}
WRITE_DOCS=1
if [[ "${QUICK:-0}" == 1 ]]; then
  DURATION=3 REPEATS=1 WRITE_DOCS=0
fi
SERVER=$BUILD/bin/fuserank-server
BENCH=$BUILD/bin/fuserank-bench
DATA=$BUILD/bin/fuserank-kserve-data
GEN=$BUILD/bin/fuserank-gen-model

log() { echo "run_kserve_bench: $*" >&2; }
for f in "$SERVER" "$BENCH" "$DATA" "$GEN"; do
  [[ -x "$f" ]] || { log "$f is missing: build first (make build)"; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT" "$LOGS" "$TOOLS"
COMMANDS=$OUT/commands.txt
: >"$COMMANDS"
logged() {
  echo "$*" >>"$COMMANDS"
  "$@"
}
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
SECONDS=0
echo "$(cut -d' ' -f1-3 /proc/loadavg)" >"$OUT/loadavg_start.txt"

# --- perf_analyzer: sets PA (the command, an array) and PA_ROUTE, or fails with why. ----
PA_NOTES=$OUT/perf_analyzer_setup.txt
: >"$PA_NOTES"
note() { echo "$*" >>"$PA_NOTES"; log "$*"; }

setup_perf_analyzer() {
  local venv=$TOOLS/venv-perf-analyzer out
  if [[ ! -x $venv/bin/pip ]]; then
    python3 -m venv "$venv" >>"$LOGS/setup.log" 2>&1 || {
      note "python3 -m venv $venv failed: $(tail -n3 "$LOGS/setup.log")"
      return 1
    }
  fi
  if out=$("$venv/bin/pip" install --quiet "perf-analyzer==$PA_VERSION" 2>&1) &&
    "$venv/bin/perf_analyzer" --version >/dev/null 2>&1; then
    PA=("$venv/bin/perf_analyzer") PA_ROUTE="pip install perf-analyzer==$PA_VERSION"
    return 0
  fi
  note "pip install perf-analyzer==$PA_VERSION: $(grep -m1 -E 'ERROR|error' <<<"$out" || echo "$out" | tail -n1)"
  local wheel_dir=$TOOLS/perf-analyzer-$PA_VERSION
  local bin=$wheel_dir/perf_analyzer/bin/perf_analyzer
  if [[ ! -x $bin ]]; then
    mkdir -p "$wheel_dir"
    if ! out=$("$venv/bin/pip" download --quiet --no-deps --only-binary=:all: \
      --platform manylinux_2_38_x86_64 -d "$wheel_dir" "perf-analyzer==$PA_VERSION" 2>&1); then
      note "pip download of the manylinux_2_38 wheel failed: $(tail -n2 <<<"$out")"
      return 1
    fi
    "$PY" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
      "$(ls "$wheel_dir"/perf_analyzer-*.whl | head -n1)" "$wheel_dir"
    chmod +x "$bin"
  fi
  if out=$("$bin" --version 2>&1); then
    PA=("$bin") PA_ROUTE="the manylinux_2_38 wheel of perf-analyzer $PA_VERSION, run as is"
    return 0
  fi
  note "the wheel's perf_analyzer does not start here: $(head -n1 <<<"$out" | sed "s|$PWD/||")"
  setup_debian13_runtime || return 1
  local lib=$TOOLS/debian13/root/usr/lib/x86_64-linux-gnu
  PA=("$lib/ld-linux-x86-64.so.2" --library-path "$lib:/lib/x86_64-linux-gnu" "$bin")
  if ! out=$("${PA[@]}" --version 2>&1); then
    note "perf_analyzer under Debian 13's glibc failed: $out"
    return 1
  fi
  PA_ROUTE="the manylinux_2_38 wheel of perf-analyzer $PA_VERSION, started by the loader of \
Debian 13's glibc $(ls "$TOOLS"/debian13/debs/libc6_*.deb | sed 's/.*libc6_\([^_]*\)_.*/\1/') \
with Debian 13's libstdc++ (bench/out/tools/debian13; the system's glibc is untouched)"
}

# Debian 13 (trixie) libc6, libstdc++6, libgcc-s1, downloaded and unpacked, not installed.
setup_debian13_runtime() {
  local d=$TOOLS/debian13 out
  [[ -x $d/root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 ]] && return 0
  rm -rf "$d"
  mkdir -p "$d/lists/partial" "$d/cache/archives/partial" "$d/debs" "$d/root"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    >"$d/sources.list"
  local apt=(apt-get -o "Dir::Etc::SourceList=$PWD/$d/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o "Dir::State::Lists=$PWD/$d/lists" -o "Dir::Cache=$PWD/$d/cache" -o Dir::State::status=/dev/null
    -o APT::Architecture=amd64 -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  if ! out=$("${apt[@]}" update 2>&1); then
    note "apt-get update (Debian 13 index, private lists) failed: $(tail -n2 <<<"$out")"
    return 1
  fi
  if ! out=$(cd "$d/debs" && "${apt[@]}" download libc6 libstdc++6 libgcc-s1 2>&1); then
    note "apt-get download libc6 libstdc++6 libgcc-s1 (Debian 13) failed: $(tail -n2 <<<"$out")"
    return 1
  fi
  for deb in "$d"/debs/*.deb; do dpkg-deb -x "$deb" "$d/root"; done
  note "Debian 13 runtime unpacked: $(cd "$d/debs" && ls *.deb | tr '\n' ' ')"
}

PA=() PA_ROUTE=""
if setup_perf_analyzer; then
  log "perf_analyzer: $PA_ROUTE"
  "${PA[@]}" --version >"$OUT/perf_analyzer_version.txt" 2>&1 || true
else
  note "perf_analyzer cannot run on this machine (the errors above); only fuserank-bench runs"
fi

# --- model, data, server. ---------------------------------------------------------------
log "generating the bench model"
logged bash bench/models/gen_bench_model.sh "$GEN" "$MODEL" >>"$LOGS/setup.log" 2>&1
for n in $SIZES; do
  logged "$DATA" --model="$MODEL" --candidates="$n" --top_k=10 --requests_pool=512 --seed=1 \
    --out="$OUT/data_n$n.json" >"$OUT/data_n$n.txt"
done
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port) METRICS_PORT=$(free_port)
cat >"$OUT/fuserank-server.yaml" <<EOF
# Written by bench/run_kserve_bench.sh (as bench/run_cpu_bench.sh's, plus metrics).
server: {listen: "127.0.0.1:$PORT", admin_listen: "", metrics_listen: "127.0.0.1:$METRICS_PORT"}
engine: {device: cpu}
model: {path: $MODEL}
logging: {level: warn}
EOF
echo "$SERVER --config $OUT/fuserank-server.yaml" >>"$COMMANDS"
"$SERVER" --config "$OUT/fuserank-server.yaml" >"$LOGS/fuserank-server.log" 2>&1 &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  kill -0 "$SERVER_PID" 2>/dev/null || { log "the server exited: $(tail -n5 "$LOGS/fuserank-server.log")"; exit 1; }
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.2
done

# The server's CPU seconds and its stage metrics, as one JSON line.
snapshot() {
  curl -s "http://127.0.0.1:$METRICS_PORT/metrics" >"$OUT/metrics.tmp" || true
  "$PY" bench/kserve/report.py snapshot --pid="$SERVER_PID" --metrics="$OUT/metrics.tmp"
}

# One measured run: CLIENT (rank | infer), N, R; appends a JSON line to runs.jsonl.
run() {
  local client=$1 n=$2 r=$3 before after result=$OUT/${1}_n${2}_r${3}
  before=$(snapshot)
  if [[ $client == rank ]]; then
    logged "$BENCH" --target="127.0.0.1:$PORT" --model="$MODEL" --candidates="$n" --top_k=10 \
      --concurrency="$CONCURRENCY" --duration="$DURATION" --warmup=3 --seed=1 --json \
      >"$result.out" 2>>"$LOGS/fuserank-bench.err" || log "fuserank-bench failed: $LOGS"
  else
    # Three windows of DURATION/3 s after 500 warm-up requests, however they vary (-s 100:
    # this 2-core box is shared, so perf_analyzer's own stability rule could loop).
    logged "${PA[@]}" -m bench -i grpc -u "127.0.0.1:$PORT" --input-data="$OUT/data_n$n.json" \
      --concurrency-range="$CONCURRENCY" --request-parameter top_k:10:int \
      --measurement-interval=$((DURATION * 1000 / 3)) -s 100 -r 3 --warmup-request-count=500 \
      -f "$result.csv" >"$result.out" 2>&1 || log "perf_analyzer failed: $result.out"
  fi
  after=$(snapshot)
  "$PY" bench/kserve/report.py run --client="$client" --candidates="$n" --repeat="$r" \
    --result="$result" --before="$before" --after="$after" >>"$OUT/runs.jsonl"
}

for n in $SIZES; do
  for r in $(seq "$REPEATS"); do
    log "$n candidates, repeat $r: fuserank-bench (Rank)"
    run rank "$n" "$r"
    if ((${#PA[@]} > 0)); then
      log "$n candidates, repeat $r: perf_analyzer (ModelInfer)"
      run infer "$n" "$r"
    fi
  done
done
kill "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
echo "$(cut -d' ' -f1-3 /proc/loadavg)" >"$OUT/loadavg_end.txt"
cat >"$OUT/run.json" <<EOF
{"started": "$STARTED", "seconds": $SECONDS, "build": "$BUILD", "duration": $DURATION,
 "repeats": $REPEATS, "concurrency": $CONCURRENCY, "pa_version": "$PA_VERSION",
 "pa_route": "$PA_ROUTE",
 "commit": "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +dirty)"}
EOF
if [[ $WRITE_DOCS == 1 ]]; then
  "$PY" bench/kserve/report.py markdown --out="$OUT" --docs=docs/benchmarks.md
  log "done in ${SECONDS} s: $OUT, docs/benchmarks.md"
else
  "$PY" bench/kserve/report.py markdown --out="$OUT" --docs="$OUT/section.md"
  log "done in ${SECONDS} s (QUICK: docs left alone): $OUT/section.md"
fi
((${#PA[@]} > 0)) || exit 1
