#!/usr/bin/env bash
# Reload without a blip, measured: p99 latency of Rank while Admin
# ReloadModel swaps two versions of the bench model back and forth, against p99 with no
# swap, on one fuserank-server (engine.device: cpu) under the same open-loop load
# (fuserank-bench, Poisson arrivals). Steady and swap windows alternate REPEATS times so
# that drift on a shared box hits both alike; the ratio p99(swap) / p99(steady) is
# reported per pair and as the median (target: within 2x). Every reload's duration is
# logged: a window holds several swaps, so a good share of its requests meet one.
#
# usage: bench/reload_bench.sh          (from anywhere; ~3 minutes with the defaults)
# env:   BUILD=build  RATE=200  CANDIDATES=64  DURATION=12  WARMUP=2  REPEATS=3
#        SWAP_EVERY=1.5 (seconds between reloads)  SIZE=bench (the 335 MB bench model of
#        bench/models/gen_bench_model.sh) | small (a 31 MB one)  ENGINE="{device: cpu}"
# Writes bench/out/reload/{results/*.json,summary.json,logs/}; prints the summary.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
PY=/usr/bin/python3
OUT=bench/out/reload
BENCH=$BUILD/bin/fuserank-bench
SERVER=$BUILD/bin/fuserank-server
GEN=$BUILD/bin/fuserank-gen-model
RATE=${RATE:-200}
CANDIDATES=${CANDIDATES:-64}
DURATION=${DURATION:-12}
WARMUP=${WARMUP:-2}
REPEATS=${REPEATS:-3}
SWAP_EVERY=${SWAP_EVERY:-1.5}
SIZE=${SIZE:-bench}
ENGINE=${ENGINE:-"{device: cpu}"}
PORT=${PORT:-18790}
ADMIN_PORT=${ADMIN_PORT:-18791}

for f in "$BENCH" "$SERVER" "$GEN"; do
  [[ -x "$f" ]] || { echo "reload_bench: $f is missing: build it first" >&2; exit 1; }
done
rm -rf "$OUT/results" "$OUT/logs"
mkdir -p "$OUT/results" "$OUT/logs" "$OUT/models"
log() { echo "reload_bench: $*" >&2; }

# Two versions of one model: same shape, other weights and version string.
gen() {  # gen VERSION SEED
  local out=$OUT/models/$1/bench.yaml
  [[ -f $out && -f $OUT/models/$1/.size-$SIZE ]] && return
  rm -rf "$OUT/models/$1"
  if [[ $SIZE == bench ]]; then
    local L=200000 S=1000
    "$GEN" --out="$out" --name=bench --version="$1" --seed="$2" --user_tables=8 \
      --item_tables=18 --rows="$L,$L,$L,$L,$S,$S,$S,$S,$L,$L,$L,$L,$L,$L,$L,$L,$L,$S,$S,$S,$S,$S,$S,$S,$S,$S" \
      --dim=32 --dense_user=5 --dense_item=8 --bottom_mlp=64,32 --interaction=dot \
      --top_mlp=256,128,1 --dtype=fp32 >&2
  else
    "$GEN" --out="$out" --name=bench --version="$1" --seed="$2" --user_tables=2 --item_tables=4 \
      --rows=40000 --dim=32 --dense_user=5 --dense_item=8 --bottom_mlp=64,32 \
      --interaction=dot --top_mlp=256,128,1 --dtype=fp32 >&2
  fi
  touch "$OUT/models/$1/.size-$SIZE"
}
gen v1 3
gen v2 4
V1=$PWD/$OUT/models/v1/bench.yaml
V2=$PWD/$OUT/models/v2/bench.yaml

cat >"$OUT/results/server.yaml" <<EOF
server:
  listen: "127.0.0.1:$PORT"
  admin_listen: "127.0.0.1:$ADMIN_PORT"
  metrics_listen: ""
engine: $ENGINE
model: {path: "$V1", watch_interval_seconds: 0}
logging: {level: info}
EOF
"$SERVER" --config "$OUT/results/server.yaml" >"$OUT/logs/server.log" 2>&1 &
SERVER_PID=$!
RELOADER_PID=
cleanup() {
  [[ -n $RELOADER_PID ]] && kill "$RELOADER_PID" 2>/dev/null || true
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
}
trap cleanup EXIT

# The Admin client: Python stubs generated from proto/ (Debian's python3-grpc-tools).
STUBS=$(mktemp -d)
"$PY" -m grpc_tools.protoc -Iproto --python_out="$STUBS" --grpc_python_out="$STUBS" \
  fuserank/v1/admin.proto
cat >"$STUBS/reloader.py" <<'EOF'
"""Waits for the server, then (with --every) calls ReloadModel alternating two specs."""
import json, sys, time
import grpc
from fuserank.v1 import admin_pb2, admin_pb2_grpc

target, every, paths, log = sys.argv[1], float(sys.argv[2]), sys.argv[3:5], sys.argv[5]
channel = grpc.insecure_channel(target)
grpc.channel_ready_future(channel).result(timeout=120)
stub = admin_pb2_grpc.AdminStub(channel)
if every <= 0:
    sys.exit(0)
with open(log, "a") as out:
    i = 0
    while True:
        start = time.monotonic()
        try:
            r = stub.ReloadModel(admin_pb2.ReloadModelRequest(path=paths[i % 2]), timeout=120)
            rec = {"t": time.time(), "ok": True, "version": r.model_version,
                   "seconds": time.monotonic() - start}
        except grpc.RpcError as e:
            rec = {"t": time.time(), "ok": False, "error": e.details(),
                   "seconds": time.monotonic() - start}
        out.write(json.dumps(rec) + "\n")
        out.flush()
        i += 1
        time.sleep(max(0.0, every - (time.monotonic() - start)))
EOF
PYTHONPATH=$STUBS "$PY" "$STUBS/reloader.py" "127.0.0.1:$ADMIN_PORT" 0 "$V1" "$V2" /dev/null
log "server up (pid $SERVER_PID); model $SIZE; rate $RATE/s, $CANDIDATES candidates"

run_window() {  # run_window NAME
  local cmd=("$BENCH" --target="127.0.0.1:$PORT" --model="$V1" --candidates="$CANDIDATES"
    --rate="$RATE" --duration="$DURATION" --warmup="$WARMUP" --json)
  echo "${cmd[*]}" >>"$OUT/results/commands.txt"
  "${cmd[@]}" 2>>"$OUT/logs/bench.err" | tail -n 1 >"$OUT/results/$1.json"
}

: >"$OUT/results/commands.txt"
for r in $(seq 1 "$REPEATS"); do
  log "repeat $r: steady"
  run_window "steady_$r"
  log "repeat $r: swapping every $SWAP_EVERY s"
  PYTHONPATH=$STUBS "$PY" "$STUBS/reloader.py" "127.0.0.1:$ADMIN_PORT" "$SWAP_EVERY" \
    "$V2" "$V1" "$OUT/results/reloads_$r.jsonl" &
  RELOADER_PID=$!
  run_window "swap_$r"
  kill "$RELOADER_PID" 2>/dev/null || true
  wait "$RELOADER_PID" 2>/dev/null || true
  RELOADER_PID=
  sleep 1
done

"$PY" - "$OUT" "$REPEATS" <<'EOF'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
rows, ratios = [], []
for r in range(1, repeats + 1):
    steady = json.load(open(f"{out}/results/steady_{r}.json"))
    swap = json.load(open(f"{out}/results/swap_{r}.json"))
    reloads = [json.loads(l) for l in open(f"{out}/results/reloads_{r}.jsonl")]
    ok = [x["seconds"] for x in reloads if x["ok"]]
    ratio = swap["p99_ms"] / steady["p99_ms"]
    ratios.append(ratio)
    rows.append({"repeat": r, "steady_p50_ms": steady["p50_ms"], "steady_p99_ms": steady["p99_ms"],
                 "swap_p50_ms": swap["p50_ms"], "swap_p99_ms": swap["p99_ms"],
                 "p99_ratio": round(ratio, 3),
                 "steady_errors": steady["errors"], "swap_errors": swap["errors"],
                 "steady_qps": steady["qps"], "swap_qps": swap["qps"],
                 "reloads_ok": len(ok), "reloads_failed": len(reloads) - len(ok),
                 "reload_seconds_median": round(statistics.median(ok), 3) if ok else None})
summary = {"repeats": rows, "median_p99_ratio": round(statistics.median(ratios), 3)}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
print(f"{'rep':>3} {'steady p50':>10} {'steady p99':>10} {'swap p50':>9} {'swap p99':>9} "
      f"{'ratio':>6} {'errors':>7} {'reloads':>7} {'reload s':>8}")
for x in rows:
    print(f"{x['repeat']:>3} {x['steady_p50_ms']:>10.3f} {x['steady_p99_ms']:>10.3f} "
          f"{x['swap_p50_ms']:>9.3f} {x['swap_p99_ms']:>9.3f} {x['p99_ratio']:>6.2f} "
          f"{x['steady_errors'] + x['swap_errors']:>7} {x['reloads_ok']:>7} "
          f"{x['reload_seconds_median'] or 0:>8.3f}")
print(f"median p99 ratio (swap / steady): {summary['median_p99_ratio']:.2f}")
EOF
