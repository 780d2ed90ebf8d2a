#!/usr/bin/env bash
# One call of the device tool that runs halves of the GPU check back to back:
#
#   bench/gpu/device_call.sh tests bench     (on the GPU machine, .bundle carried)
#
# The device tool brings back at most 8 files from $OUT, no deeper than two folders, while a
# half writes a dozen logs and reports. So each half runs with its logs in a scratch folder
# (/tmp/gpu-check/<half>, the end-to-end servers' logs and configs under it too) and leaves
# in $OUT two files: <half>-summary.txt (its verdict) and <half>-logs.tgz (every log, the
# generated weights left out). The exit status is the first failing half's, else 0.
# Environment: OUT (required: the device tool's output folder), TESTS_BUDGET_S (120),
# BENCH_BUDGET_S (300): each half's CHECK_BUDGET_S; CALL_BUDGET_S (400): the whole call's,
# 20 s below the device tool's timeout_s. A half gets no more than what the call has left,
# less the 35 s of its hard limit (its budget plus 30 s, then a kill 5 s later), so it ends
# within the call's budget and its summary and logs are packed into $OUT before the device
# tool would stop the call.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${OUT:?set OUT to the folder to bring back}
SCRATCH=/tmp/gpu-check
if (($# == 0)); then
  echo "usage: $0 tests|bench [tests|bench]" >&2
  exit 2
fi
status=0
for half in "$@"; do
  case $half in
    tests) budget=${TESTS_BUDGET_S:-120} ;;
    bench) budget=${BENCH_BUDGET_S:-300} ;;
    *)
      echo "device_call: unknown half '$half' (tests or bench)" >&2
      exit 2
      ;;
  esac
  left=$((${CALL_BUDGET_S:-400} - SECONDS - 35))
  ((budget > left)) && budget=$left
  dir=$SCRATCH/$half
  rm -rf "$dir"
  mkdir -p "$dir"
  if ((budget < 30)); then
    echo "gpu-check: FAIL ($half not started: the call's time budget is spent)" >"$dir/summary.txt"
    rc=125
  else
    OUT=$dir WORK=$dir/e2e CHECK_BUDGET_S=$budget timeout --kill-after=5 $((budget + 30)) \
      bash "$ROOT/bench/gpu/check.sh" run "$half"
    rc=$?
  fi
  ((rc != 0 && status == 0)) && status=$rc
  cp "$dir/summary.txt" "$DEST/$half-summary.txt" 2>/dev/null ||
    echo "gpu-check: FAIL ($half wrote no summary; exit status $rc)" >"$DEST/$half-summary.txt"
  tar -czf "$DEST/$half-logs.tgz" -C "$SCRATCH" --exclude='*.safetensors' "$half"
done
echo "device_call: halves $*: exit status $status"
exit $status
