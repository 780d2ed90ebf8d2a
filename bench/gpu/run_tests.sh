#!/usr/bin/env bash
# The tests half of the GPU check (check.sh run tests), on the GPU machine from the bundle:
#   1. smoke (<= 20 s): every bundled library resolves (ldd); the suites partition the test
#      list (suites.py check); the probe kernel runs and the module scores a batch
#      (GpuSmokeTest). A failure stops the run here with one clear line.
#   2. one gpu_tests process per suite of suites.py, each with its XML report, with
#      FUSERANK_REQUIRE_GPU=1 (a GPU test that would skip fails instead);
#   3. compute-sanitizer memcheck, then racecheck, each on a few small cases (API-error
#      reporting off), or a line saying why it did not run;
#   4. the fault suite (a device fault injected into a child process), last.
# The verdict (summarize.py tests) is the last line; the exit status matches it.
# Environment: OUT (logs), BUNDLE, CHECK_BUDGET_S (270: the whole run's time budget).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/check_lib.sh"
DEADLINE=$((SECONDS + ${CHECK_BUDGET_S:-270}))
mkdir -p "$OUT/xml"
: >"$OUT/steps.tsv"
setup_env
TESTS="$BUNDLE/bin/gpu_tests"

verdict() {
  python3 "$HERE/summarize.py" tests "$OUT" | tee "$OUT/summary.txt"
  exit "${PIPESTATUS[0]}"
}

# 1. Smoke.
export BUNDLE
step ldd 10 ldd.log bash -c check_libraries || verdict
step partition 10 partition.log bash -c "'$TESTS' --gtest_list_tests >'$OUT/test_list.txt' && python3 '$HERE/suites.py' check '$OUT/test_list.txt'" || {
  echo "gpu-check: FAIL (smoke: the suites do not partition gpu_tests' tests; see partition.log)" | tee "$OUT/summary.txt"
  exit 1
}
suite() {
  local name=$1 cap=$2
  step "suite:$name" "$cap" "$name.log" "$TESTS" --gtest_brief=1 \
    "--gtest_filter=$(python3 "$HERE/suites.py" filter "$name")" \
    "--gtest_output=xml:$OUT/xml/$name.xml"
}
suite smoke 20 || verdict

# 2. Every suite in its own process: a fault names its suite and spares the others. The
# injected device fault (suite fault) runs last, after the sanitizers: should the driver
# take the fault further than its child process, nothing else is lost to it.
declare -A CAP=([lookup]=45 [interaction]=30 [topk]=30 [pipeline]=75 [graph_update]=20
  [host_tables]=45 [module]=20 [backend]=45)
for name in $(python3 "$HERE/suites.py" names); do
  [[ $name == smoke || $name == fault ]] && continue
  suite "$name" "${CAP[$name]:-30}"
done

# 3. The sanitizers on small cases (suites.py memcheck / racecheck): memcheck (out of
# bounds, misaligned), then racecheck (shared-memory hazards). --error-exitcode makes any
# error fail the step; summarize.py also reads each log's summary line.
sanitizer() {  # sanitizer TOOL CAP
  local tool=$1 cap=$2
  if ! command -v compute-sanitizer >/dev/null; then
    echo "$tool: not run (tool missing)" >"$OUT/$tool.log"
    return
  fi
  local flags=(--tool "$tool" --error-exitcode 9)
  # Only errors of our kernels count: API errors the code checks itself are not reported.
  if compute-sanitizer --help 2>&1 | grep -q -- '--report-api-errors'; then
    flags+=(--report-api-errors no)
  fi
  echo "compute-sanitizer ${flags[*]}" >"$OUT/$tool.flags"
  # The MLP autotune off (tests/kernels/pipeline_util.h): timing every cuBLASLt proposal
  # under the sanitizer would cost minutes and check nothing more.
  step "$tool" "$cap" "$tool.log" env FUSERANK_TEST_MLP_AUTOTUNE=0 compute-sanitizer "${flags[@]}" \
    "$TESTS" --gtest_brief=1 "--gtest_filter=$(python3 "$HERE/suites.py" "$tool")" \
    "--gtest_output=xml:$OUT/xml/$tool.xml"
  if grep -q 'Device not supported' "$OUT/$tool.log"; then
    echo "$tool: not run (compute-sanitizer does not support this device's runtime)" >>"$OUT/$tool.log"
  fi
}
sanitizer memcheck 120
sanitizer racecheck 60

# 4. The injected device fault.
suite fault "${CAP[fault]:-30}"
verdict
