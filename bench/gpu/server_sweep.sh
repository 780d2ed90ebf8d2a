#!/usr/bin/env bash
# Where the time of a Rank call goes on the GPU server, and which engine settings meet the
# server target (>= 10,000 requests/s of 256 candidates at p99 <= 1 ms): the bench model
# on E2E_DEVICE under several `engine:` settings, each under closed-loop load
# (fuserank-bench, 256 candidates, concurrency 8, 16 and 32, 3 s after 1 s of warm-up),
# with, per load point, the server's mean stage times and batch size (/metrics, e2e_report.py
# stages) and the machine's CPU use (/proc/stat).
# Prints one JSON line per result on stdout (summarize.py reads them); progress on stderr.
# Environment: BIN (the binaries), E2E_DEVICE (cuda), WORK (scratch), PORT_BASE (18800),
# SWEEP_QUICK (0; 1: the first two settings, 1 s per point: what CI runs on the CPU).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
QUICK=${SWEEP_QUICK:-0}
DEFAULT_PORT=18800
source "$HERE/e2e_lib.sh"

# (label|engine keys|fuserank-bench threads and channels). Run 4 (docs/gpu-runs/2026-12-04-4)
# also tried "wait 50, spin", 8 streams and twice the client threads: none beat these, and
# the bench half's time budget is better spent elsewhere.
SETTINGS=(
  "default|streams: 4|4"
  "wait 50|streams: 4, max_batch_wait_us: 50|4"
  "wait 0, nice 0|streams: 4, max_batch_wait_us: 0, worker_nice: 0|4"
  "wait 0, spin, nice 0|streams: 4, max_batch_wait_us: 0, cuda_wait: spin, worker_nice: 0|4"
)
duration=3
concurrencies=(8 16 32)
if [[ $QUICK == 1 ]]; then
  SETTINGS=("${SETTINGS[@]:0:2}")  # default, wait 50
  duration=1
  concurrencies=(4)
  model="$WORK/sweep.yaml"
  "$BIN/fuserank-gen-model" --out="$model" --seed=11 --user_tables=2 --item_tables=4 \
    --rows=5000 --dim=16 --dense_user=2 --dense_item=3 --bottom_mlp=32,16 --interaction=dot \
    --top_mlp=64,32,1 >/dev/null
else
  model="$WORK/bench.yaml"
  bash "$ROOT/bench/models/gen_bench_model.sh" "$BIN/fuserank-gen-model" "$model" >/dev/null
fi

busy_total() {  # busy and total jiffies of all cores
  awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat
}

i=0
for setting in "${SETTINGS[@]}"; do
  IFS='|' read -r label engine client <<<"$setting"
  i=$((i + 1))
  if ! serve "sweep-$i" "$DEVICE" "$model" "$PORT" "$engine"; then
    python3 -c 'import json, sys; print(json.dumps({"bench": "sweep", "setting": sys.argv[1], "errors": 1, "problem": sys.argv[2]}))' "$label" "$START_ERROR"
    failed=1
    continue
  fi
  state="$WORK/sweep-$i.metrics.json"
  rm -f "$state"
  for concurrency in "${concurrencies[@]}"; do
    # The stage means cover the warm-up second too: the scrape before it is the baseline.
    python3 "$HERE/e2e_report.py" stages $((PORT + 1)) "$state" >/dev/null
    read -r busy0 total0 < <(busy_total)
    load=$("$BIN/fuserank-bench" --target="127.0.0.1:$PORT" --model="$model" --candidates=256 \
      --concurrency="$concurrency" --duration="$duration" --warmup=1 --threads="$client" \
      --channels="$client" --top_k=100 --json 2>/dev/null | tail -n 1)
    read -r busy1 total1 < <(busy_total)
    stages=$(python3 "$HERE/e2e_report.py" stages $((PORT + 1)) "$state")
    python3 - "$label" "$engine" "$concurrency" "$load" "$stages" \
      "$(((busy1 - busy0) * 1000 / (total1 - total0 + 1)))" "$(nproc)" <<'PY' || failed=1
import json, sys
label, engine, conc, load, stages, busy_permille, cores = sys.argv[1:8]
try:
    r = json.loads(load)
except ValueError:
    print(json.dumps({"bench": "sweep", "setting": label, "errors": 1,
                      "problem": f"no JSON from fuserank-bench: {load[:200]}"}))
    sys.exit(1)
row = {"bench": "sweep", "setting": label, "engine": engine, "concurrency": int(conc),
       "qps": r.get("qps", 0), "p50_ms": r.get("p50_ms", 0), "p99_ms": r.get("p99_ms", 0),
       "errors": r.get("errors", 0), "cpu_busy_cores": round(int(busy_permille) / 1000 * int(cores), 1)}
row.update({k: v for k, v in json.loads(stages).items() if k != "bench"})
print(json.dumps(row))
sys.exit(0 if row["errors"] == 0 and r.get("ok", 0) > 0 else 1)
PY
  done
  stop_all
done
exit $failed
