#!/usr/bin/env bash
# Reload under load on E2E_DEVICE: the bench model served from $WORK/served/ with the file
# watch on (1 s), fuserank-bench in open loop (RATE requests/s of CANDIDATES candidates,
# Poisson arrivals), and windows of DURATION seconds that alternate REPEATS times: steady
# (no change), then swapping (every SWAP_EVERY s the spec is renamed over with the next
# version number, so the watch loads a new version of the model: a new backend, its
# upload, warm-up and graphs, while the old version serves). Target: no failed request,
# p99 while swapping within 2x of steady.
# Prints one JSON line per window ({"bench": "reload", ...}: the window, errors, p99,
# reloads the server logged in it) and a summary line ({"bench": "reload_summary"}) on
# stdout; progress on stderr. Exit 1 on a failed request or no reload in a swap window.
# Environment: BIN, E2E_DEVICE (cuda), WORK, PORT_BASE (18900), RATE (2000), CANDIDATES
# (256), DURATION (8), REPEATS (2), SWAP_EVERY (3); RELOAD_QUICK=1: a small model, 100/s of
# 16 candidates, one pair of 5 s windows (what CI runs on the CPU).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
QUICK=${RELOAD_QUICK:-0}
DEFAULT_PORT=18900
source "$HERE/e2e_lib.sh"
if [[ $QUICK == 1 ]]; then
  RATE=${RATE:-100} CANDIDATES=${CANDIDATES:-16} DURATION=${DURATION:-5} REPEATS=${REPEATS:-1}
  SWAP_EVERY=${SWAP_EVERY:-2}
else
  RATE=${RATE:-2000} CANDIDATES=${CANDIDATES:-256} DURATION=${DURATION:-8}
  REPEATS=${REPEATS:-2} SWAP_EVERY=${SWAP_EVERY:-3}
fi
served="$WORK/served"
spec="$served/bench.yaml"
mkdir -p "$served"
if [[ $QUICK == 1 ]]; then
  "$BIN/fuserank-gen-model" --out="$spec" --name=bench --seed=11 --user_tables=2 \
    --item_tables=4 --rows=5000 --dim=16 --dense_user=2 --dense_item=3 --bottom_mlp=32,16 \
    --interaction=dot --top_mlp=64,32,1 >/dev/null
else
  bash "$ROOT/bench/models/gen_bench_model.sh" "$BIN/fuserank-gen-model" "$spec" >/dev/null
fi
if ! WATCH_SECONDS=1 LOG_LEVEL=info serve reload "$DEVICE" "$spec" "$PORT"; then
  python3 -c 'import json, sys; print(json.dumps({"bench": "reload_summary", "errors": 1, "problem": sys.argv[1]}))' "$START_ERROR"
  exit 1
fi
server_log="$WORK/reload.log"
version=1
swapper() {  # renames the spec over with the next version every SWAP_EVERY seconds
  while true; do
    sleep "$SWAP_EVERY"
    version=$((version + 1))
    sed "s/^version: .*/version: \"$version\"/" "$spec" >"$spec.tmp" && mv "$spec.tmp" "$spec"
  done
}
reloads_logged() { grep -c 'changed, reloading' "$server_log" || true; }

window() {  # window KIND: one measured window; prints its JSON line
  local kind=$1 before after swap_pid=""
  before=$(reloads_logged)
  if [[ $kind == swap ]]; then
    version=$(sed -n 's/^version: "\{0,1\}\([0-9]*\)"\{0,1\}$/\1/p' "$spec")
    swapper &
    swap_pid=$!
  fi
  local load
  load=$("$BIN/fuserank-bench" --target="127.0.0.1:$PORT" --model="$spec" \
    --candidates="$CANDIDATES" --rate="$RATE" --duration="$DURATION" --warmup=1 --threads=4 \
    --channels=4 --top_k=100 --timeout_ms=2000 --json 2>/dev/null | tail -n 1)
  if [[ -n $swap_pid ]]; then
    kill "$swap_pid" 2>/dev/null
    wait "$swap_pid" 2>/dev/null
    sleep 3  # the last change is loaded (two watch intervals) before the next window
  fi
  after=$(reloads_logged)
  python3 - "$kind" "$load" "$((after - before))" <<'PY'
import json, sys
kind, load, reloads = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    r = json.loads(load)
except ValueError:
    print(json.dumps({"bench": "reload", "window": kind, "errors": -1, "reloads": reloads,
                      "problem": f"no JSON from fuserank-bench: {load[:200]}"}))
    sys.exit(0)
print(json.dumps({"bench": "reload", "window": kind, "ok": r.get("ok", 0),
                  "errors": r.get("errors", 0), "qps": r.get("qps", 0),
                  "p50_ms": r.get("p50_ms", 0), "p99_ms": r.get("p99_ms", 0),
                  "reloads": reloads}))
PY
}

rows="$WORK/reload_windows.jsonl"
: >"$rows"
for _ in $(seq 1 "$REPEATS"); do
  window steady | tee -a "$rows"
  window swap | tee -a "$rows"
done
stop_all
python3 - "$rows" "$(grep -c '\[error\]' "$server_log" || true)" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steady = [r for r in rows if r["window"] == "steady"]
swap = [r for r in rows if r["window"] == "swap"]
problems = [r["problem"] for r in rows if "problem" in r]
errors = sum(max(r.get("errors", 0), 0) for r in rows) + (len(problems) > 0)
ratios = [b["p99_ms"] / a["p99_ms"] for a, b in zip(steady, swap) if a.get("p99_ms", 0) > 0]
summary = {"bench": "reload_summary", "errors": errors,
           "reloads": sum(r.get("reloads", 0) for r in swap),
           "steady_p99_ms": statistics.median([r.get("p99_ms", 0) for r in steady] or [0]),
           "swap_p99_ms": statistics.median([r.get("p99_ms", 0) for r in swap] or [0]),
           "p99_ratio": statistics.median(ratios) if ratios else 0,
           "server_errors_logged": int(sys.argv[2])}
if problems:
    summary["problem"] = problems[0]
print(json.dumps(summary))
ok = errors == 0 and all(r.get("reloads", 0) > 0 for r in swap) and not problems
sys.exit(0 if ok else 1)
PY
