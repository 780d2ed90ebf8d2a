#!/usr/bin/env bash
# The CPU engine's code paths side by side (docs/benchmarks.md, "CPU engine: ISA dispatch
# and the AVX-512 sgemm"): BM_PeakFma, BM_EngineMlp, BM_EngineMlpLayer and the one-thread
# BM_EngineRun of this build on every path, and with OLD=<build dir of another version>
# that version's BM_EngineMlp and BM_EngineRun, the two binaries alternating round by
# round so that a shared machine's load hits both. Prints medians of CPU time (the
# thread's own: time slices lost to other work do not count) with the best repetition.
# usage: [BUILD=build] [OLD=dir] [ROUNDS=3] [REPS=5] [OUT=bench/out/isa] bench/run_isa_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OLD=${OLD:-}
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-5}
OUT=${OUT:-bench/out/isa}
mkdir -p "$OUT"
rm -f "$OUT"/*.json
common=(--benchmark_repetitions="$REPS" --benchmark_min_time=0.2 --benchmark_out_format=json)
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round: $(uptime)" | tee -a "$OUT/loadavg.txt"
  if [[ -n "$OLD" ]]; then
    "$OLD/bin/fuserank-microbench" "${common[@]}" --benchmark_out="$OUT/old_$round.json" \
      --benchmark_filter='BM_Engine(Run/candidates:[0-9]+/threads:1/|Mlp/)' >/dev/null
  fi
  "$BUILD/bin/fuserank-microbench" "${common[@]}" --benchmark_out="$OUT/new_$round.json" \
    --benchmark_filter='BM_PeakFma|BM_EngineMlp|BM_EngineRun/candidates:[0-9]+/threads:1/' \
    >/dev/null
done
/usr/bin/python3 - "$OUT" <<'PY'
import glob, json, statistics, sys
runs = {}
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    tag = path.rsplit("/", 1)[1].split("_")[0]
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "iteration" and not b.get("error_occurred"):
            runs.setdefault((b["run_name"].replace("/real_time", ""), tag), []).append(b)
for (name, tag), bs in sorted(runs.items()):
    line = f"{tag:3} {name:48} n={len(bs):2} cpu={statistics.median(b['cpu_time'] for b in bs):9.1f}"
    line += bs[0]["time_unit"]
    for counter in ("GFLOPs", "of_peak"):
        if counter in bs[0]:
            values = [b[counter] for b in bs]
            line += f" {counter}={statistics.median(values):.3g} ({max(values):.3g})"
    print(line + " " + bs[0].get("label", ""))
PY
