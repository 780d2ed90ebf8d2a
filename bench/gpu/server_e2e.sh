#!/usr/bin/env bash
# fuserank-server end to end on one device, checked against the same server on the CPU:
#   - small models covering dot / concat / linear / dcn, fp32 / fp16 / bf16, sum / mean, and the
#     bench model: for each, a server on E2E_DEVICE and one on the CPU get the same 200
#     requests (one-hot and multi-hot bags, with and without weights, 16 to 1000
#     candidates) and fuserank-score-compare reports the largest score difference;
#   - on cuda, dot_fp32_sum again with cache.placement: host (tables in host memory, the
#     frequency policy filling the device hot-row cache every second) against the CPU;
#   - the bench model under closed-loop load (fuserank-bench, concurrency 16 and 64,
#     16/256/1024 candidates): qps, p50, p99; then the DLRM-v2 preset at 256 candidates;
#   - a /metrics scrape: stage histograms and the cache lookup series moved, and
#     fuserank_model_info says device="<E2E_DEVICE>".
# Prints one JSON line per result on stdout (summarize.py reads them); progress on stderr.
# Runs on the GPU machine (run_bench.sh) and, with E2E_DEVICE=cpu E2E_QUICK=1, in CI
# (tests/bench/gpu_check_test.py), which checks the script itself.
# Environment: BIN (the binaries), E2E_DEVICE (cuda), E2E_QUICK (0: also the bench model
# and the load points), WORK (scratch: the generated models and configs), PORT_BASE (18700).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
QUICK=${E2E_QUICK:-0}
DEFAULT_PORT=18700
source "$HERE/e2e_lib.sh"

# problem KIND NAME TEXT: a JSON line for a step that could not run (summarize.py fails it).
problem() {
  python3 -c 'import json, sys; print(json.dumps({"bench": sys.argv[1], "model": sys.argv[2], "requests": 0, "errors": 1, "problem": sys.argv[3]}))' "$@"
}

gen() {  # gen NAME FLAGS...: a seeded model at $WORK/NAME.yaml
  local name=$1
  shift
  "$BIN/fuserank-gen-model" --out="$WORK/$name.yaml" --seed=11 "$@" >/dev/null
}

# compare NAME [MODEL]: the model MODEL (default NAME) on DEVICE against the CPU, reported
# as NAME; leaves the DEVICE server running.
compare() {
  local name=$1 model="$WORK/${2:-$1}.yaml"
  if ! serve "$name-test-$DEVICE" "$DEVICE" "$model" "$PORT" ||
    ! CACHE_KEYS="" serve "$name-reference-cpu" cpu "$model" $((PORT + 2)); then
    problem compare "$name" "$START_ERROR"
    return 1
  fi
  "$BIN/fuserank-score-compare" --test="127.0.0.1:$PORT" --reference="127.0.0.1:$((PORT + 2))" \
    --model="$model" --label="$name" --requests=200 || failed=1
}

log "models into $WORK"
gen dot_fp32_sum --user_tables=2 --item_tables=4 --rows=5000 --dim=16 --dense_user=2 \
  --dense_item=3 --bottom_mlp=32,16 --interaction=dot --top_mlp=64,32,1 --dtype=fp32 --pooling=sum
gen concat_fp16_mean --user_tables=2 --item_tables=3 --rows=3000 --dim=12 --dense_user=3 \
  --dense_item=2 --bottom_mlp=16,8 --interaction=concat --top_mlp=32,1 --dtype=fp16 --pooling=mean
gen linear_bf16_sum --user_tables=1 --item_tables=3 --rows=2000 --dim=8 --dense_user=2 \
  --dense_item=2 --bottom_mlp=8 --interaction=linear --cross_dim=24 --top_mlp=16,1 --dtype=bf16
gen dot_bf16_mean_nodense --user_tables=3 --item_tables=3 --rows=4000 --dim=32 \
  --interaction=dot --top_mlp=64,1 --dtype=bf16 --pooling=mean
gen dcn_fp16_lowrank --user_tables=2 --item_tables=3 --rows=3000 --dim=16 --dense_user=2 \
  --dense_item=3 --bottom_mlp=32,16 --interaction=dcn --dcn_layers=3 --dcn_low_rank=24 \
  --top_mlp=64,32,1 --dtype=fp16
for name in dot_fp32_sum concat_fp16_mean linear_bf16_sum dot_bf16_mean_nodense \
  dcn_fp16_lowrank; do
  compare "$name" || failed=1
  stop_all
done
if [[ $DEVICE == cuda ]]; then
  # The tables in host memory behind the device hot-row cache (the CPU reference keeps the
  # default cache keys: placement: host is refused on the CPU engine).
  if CACHE_KEYS="placement: host, policy: frequency, rebuild_interval_seconds: 1" \
    compare dot_fp32_sum_host_tables dot_fp32_sum; then
    # Traffic, a rebuild of the hot sets from it, more traffic: the device cache must serve
    # some of the second. A worker adds its device counts to /metrics with a batch at least
    # a second after its last read, so each 2 s run reports all but its workers' last
    # second.
    for _ in 1 2; do
      "$BIN/fuserank-bench" --target="127.0.0.1:$PORT" --model="$WORK/dot_fp32_sum.yaml" \
        --candidates=64 --concurrency=4 --duration=2 --warmup=0 --json >/dev/null 2>&1
      sleep 1.5
    done
    python3 "$HERE/e2e_report.py" hits $((PORT + 1)) || failed=1
  else
    failed=1
  fi
  stop_all
fi

if [[ $QUICK == 1 ]]; then
  load_model="$WORK/dot_fp32_sum.yaml"
  if ! serve "load-$DEVICE" "$DEVICE" "$load_model" "$PORT"; then
    problem load dot_fp32_sum "$START_ERROR"
    exit 1
  fi
  points=("16 4")
  duration=1
else
  bash "$ROOT/bench/models/gen_bench_model.sh" "$BIN/fuserank-gen-model" "$WORK/bench.yaml" >/dev/null
  # The bench-model server on DEVICE keeps running for the load.
  if ! compare bench; then
    problem load bench "no server on $DEVICE to load: ${START_ERROR:-the comparison failed}"
    exit 1
  fi
  load_model="$WORK/bench.yaml"
  points=("16 16" "16 64" "256 16" "256 64" "1024 16" "1024 64")
  duration=3
fi
for point in "${points[@]}"; do
  read -r candidates concurrency <<<"$point"
  "$BIN/fuserank-bench" --target="127.0.0.1:$PORT" --model="$load_model" \
    --candidates="$candidates" --concurrency="$concurrency" --duration="$duration" --warmup=1 \
    --threads=4 --channels=4 --top_k=100 --json 2>/dev/null | tail -n 1 |
    python3 "$HERE/e2e_report.py" load "$candidates" "$concurrency" || failed=1
done
python3 "$HERE/e2e_report.py" metrics $((PORT + 1)) "$DEVICE" || failed=1
stop_all
if [[ $QUICK != 1 ]]; then
  # The MLPerf DLRM-v2 shape (docs/benchmarks.md, "MLPerf DLRM-v2 anchor"): load only.
  "$BIN/fuserank-gen-model" --out="$WORK/dlrm_v2.yaml" --seed=4 --preset=dlrm_v2 >/dev/null
  if serve "dlrm_v2-$DEVICE" "$DEVICE" "$WORK/dlrm_v2.yaml" "$PORT"; then
    for concurrency in 16 64; do
      "$BIN/fuserank-bench" --target="127.0.0.1:$PORT" --model="$WORK/dlrm_v2.yaml" \
        --candidates=256 --concurrency="$concurrency" --duration=3 --warmup=1 --threads=4 \
        --channels=4 --top_k=100 --json 2>/dev/null | tail -n 1 |
        python3 "$HERE/e2e_report.py" load 256 "$concurrency" dlrm_v2 || failed=1
    done
  else
    problem load dlrm_v2 "$START_ERROR"
    failed=1
  fi
  stop_all
fi
exit $failed
