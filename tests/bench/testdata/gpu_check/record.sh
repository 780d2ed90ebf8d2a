#!/usr/bin/env bash
# Records the fixtures of tests/bench/gpu_check_test.py from real gtest runs on a machine
# without a GPU (gpu_tests, engine_tests of BUILD): one folder per kind of run, each as
# bench/gpu/run_tests.sh leaves it (steps.tsv, xml/<suite>.xml, logs).
#   all_pass      every suite's report has only passing tests (the tests that pass without
#                 a GPU: the launchers' empty-input cases and host tests of the GPU layout)
#   all_skip      every suite as gpu_tests runs it here without FUSERANK_REQUIRE_GPU
#   partial_fail  as all_pass, but lookup with FUSERANK_REQUIRE_GPU=1: its kernel tests fail
#   crash         as all_pass, but the pipeline process dies mid-run (SIGTRAP at its first
#                 failure, --gtest_break_on_failure): no report
#   memcheck_errors  as all_pass, with a memcheck log that found errors
#   racecheck_hazards  as all_pass, with a racecheck log that found hazards
# all_pass also holds suites added later by hand (host_tables, graph_update, fault: none of
# their tests passes without a GPU); copy them back after recording anew.
# usage: record.sh BUILD   (from the repository root; rewrites the folders)
set -euo pipefail
BUILD=${1:?usage: record.sh BUILD}
HERE=$(cd "$(dirname "$0")" && pwd)
GPU=$BUILD/bin/gpu_tests
HOST=$BUILD/bin/engine_tests
SUITES=(smoke lookup interaction topk pipeline module backend)
declare -A PASSING=(
  [smoke]="$HOST TopKKeysTest.*"
  [lookup]="$GPU LookupLaunchTest.*"
  [interaction]="$GPU InteractionLaunchTest.*"
  [topk]="$GPU TopKLaunchTest.*"
  [pipeline]="$HOST PackedLayoutTest.*"
  [module]="$HOST GpuLayoutMathTest.*"
  [backend]="$GPU CudaBackendTest.WithoutAGpuCreationSaysWhy"
)

record() {  # record DIR SUITE LOG_RC BINARY FILTER [ENV...]
  local dir=$1 suite=$2 bin=$3 filter=$4
  shift 4
  local rc=0
  env "$@" "$bin" --gtest_brief=1 "--gtest_filter=$filter" \
    "--gtest_output=xml:$dir/xml/$suite.xml" >"$dir/$suite.log" 2>&1 || rc=$?
  printf 'suite:%s\t%s\t0\t%s.log\n' "$suite" "$rc" "$suite" >>"$dir/steps.tsv"
}

fresh() {  # fresh NAME: an empty run folder with the ldd step passed
  rm -rf "${HERE:?}/$1"
  mkdir -p "$HERE/$1/xml"
  printf 'ldd\t0\t0\tldd.log\n' >"$HERE/$1/steps.tsv"
  echo "memcheck: not run (tool missing)" >"$HERE/$1/memcheck.log"
  echo "racecheck: not run (tool missing)" >"$HERE/$1/racecheck.log"
}

passing_run() {  # passing_run NAME [SUITE-TO-LEAVE-OUT]
  local s
  for s in "${SUITES[@]}"; do
    [[ $s == "${2:-}" ]] && continue
    read -r bin filter <<<"${PASSING[$s]}"
    record "$HERE/$1" "$s" "$bin" "$filter"
  done
}

fresh all_pass
passing_run all_pass

fresh all_skip
for s in "${SUITES[@]}"; do
  record "$HERE/all_skip" "$s" "$GPU" "$(python3 bench/gpu/suites.py filter "$s")"
done

fresh partial_fail
passing_run partial_fail lookup
record "$HERE/partial_fail" lookup "$GPU" 'LookupLaunchTest.*:Tables/LookupKernelTest.*/fp32_dim4_*' \
  FUSERANK_REQUIRE_GPU=1

fresh crash
passing_run crash pipeline
rc=0
FUSERANK_REQUIRE_GPU=1 "$GPU" --gtest_brief=1 --gtest_break_on_failure \
  "--gtest_filter=$(python3 bench/gpu/suites.py filter pipeline)" \
  "--gtest_output=xml:$HERE/crash/xml/pipeline.xml" >"$HERE/crash/pipeline.log" 2>&1 || rc=$?
[[ ! -e $HERE/crash/xml/pipeline.xml ]] || { echo "the crashed run left a report" >&2; exit 1; }
printf 'suite:pipeline\t%s\t1\tpipeline.log\n' "$rc" >>"$HERE/crash/steps.tsv"

fresh memcheck_errors
passing_run memcheck_errors
cp "$HERE/all_pass/xml/lookup.xml" "$HERE/memcheck_errors/xml/memcheck.xml"
printf '========= Invalid __global__ read of size 16 bytes\n=========     at PooledLookupKernel<8>\n========= ERROR SUMMARY: 3 errors\n' \
  >"$HERE/memcheck_errors/memcheck.log"
printf 'memcheck\t9\t5\tmemcheck.log\n' >>"$HERE/memcheck_errors/steps.tsv"
fresh racecheck_hazards
passing_run racecheck_hazards
cp "$HERE/all_pass/xml/interaction.xml" "$HERE/racecheck_hazards/xml/racecheck.xml"
printf '%s\n' '========= Error: Race reported between Write access at DotInteractionKernel(fuserank::kernels::DotArgs)+0x4f0 in interaction.cu:64' \
  '=========     and Read access at DotInteractionKernel(fuserank::kernels::DotArgs)+0x7a0 in interaction.cu:76 [12 hazards]' \
  '=========' '========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)' \
  >"$HERE/racecheck_hazards/racecheck.log"
printf 'racecheck\t9\t4\tracecheck.log\n' >>"$HERE/racecheck_hazards/steps.tsv"
echo "recorded into $HERE"
