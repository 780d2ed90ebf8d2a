#!/usr/bin/env bash
# `make test-fuzz`: builds the libFuzzer targets of tests/fuzz with clang (build dir
# build-fuzz, the whole build instrumented with -fsanitize=fuzzer-no-link,address,undefined)
# and runs each for a bounded time from a temporary copy of its seed corpus, so the
# repository is never modified. Before fuzzing, every seed is run once to check that the
# seeds named valid_* are accepted by the code under test and bad_* refused (a corpus that
# no longer gets past validation would fuzz nothing). Fails (exit 1) when a seed is
# misnamed or misjudged, or when any target crashes, leaks, times out, trips a sanitizer or
# breaks one of its invariants; the input that did it is kept under
# <build>/fuzz-artifacts/<target>/ and printed (base64, so a CI log alone reproduces it)
# with the last lines of the log and the command that replays it.
#
# Environment: FUZZ_SECONDS (per target, default 30), FUZZ_TARGETS (space-separated, default
# all), FUZZ_BUILD (default build-fuzz), JOBS (build parallelism, default nproc).
# Reproduce a crash: <build>/bin/fuzz_<target> <build>/fuzz-artifacts/<target>/crash-...
# (from a CI log: base64 -d > crash.bin, then the same with crash.bin).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
if [[ $# -gt 0 ]]; then
  # Options are environment variables; print the header above for --help (and anything else).
  sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  [[ "$1" == -h || "$1" == --help ]] && exit 0
  echo "test-fuzz: takes no arguments (settings are environment variables, above)" >&2
  exit 2
fi
BUILD="${FUZZ_BUILD:-build-fuzz}"
SECONDS_EACH="${FUZZ_SECONDS:-30}"
TARGETS="${FUZZ_TARGETS:-request_decoder rank_path infer_request admin_request config safetensors model_spec model_load resp_frame}"
JOBS="${JOBS:-$(nproc)}"

for tool in clang clang++ cmake ninja; do
  command -v "${tool}" >/dev/null || { echo "test-fuzz: ${tool} not found (scripts/install-deps.sh)" >&2; exit 1; }
done

start=$(date +%s)
# Configured every time (about a second), so a build dir of older flags takes these.
CC=clang CXX=clang++ cmake -S . -B "${BUILD}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFUSERANK_CUDA=OFF -DFUSERANK_FUZZ=ON >/dev/null
cmake --build "${BUILD}" --target fuzzers -j "${JOBS}"
built=$(date +%s)

WORK="$(mktemp -d "${TMPDIR:-/tmp}/fuserank-fuzz.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT
case "${BUILD}" in /*) ARTIFACTS="${BUILD}/fuzz-artifacts" ;; *) ARTIFACTS="${ROOT}/${BUILD}/fuzz-artifacts" ;; esac
# Sanitizer findings are crashes; leaks count (libFuzzer checks them per input too).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"

# Runs each seed of a target once with FUSERANK_FUZZ_VERDICT set (tests/fuzz/fuzz_verdict.h)
# and checks its verdict against its name. Prints one line per misjudged seed; returns 1 if any.
check_seeds() {  # target binary seed_dir
  local target="$1" bin="$2" dir="$3" bad=0 seed name verdict
  for seed in "${dir}"/*; do
    name="$(basename "${seed}")"
    verdict="$(FUSERANK_FUZZ_VERDICT=1 "${bin}" -runs=1 "${seed}" 2>&1 | grep -m1 '^fuzz-verdict: ' || true)"
    case "${name}:${verdict}" in
      valid_*:"fuzz-verdict: accepted") ;;
      bad_*:"fuzz-verdict: rejected: "*) ;;
      valid_* | bad_*)
        echo "test-fuzz: seed ${dir}/${name}: ${verdict:-no verdict (crashed? run ${bin} ${seed})}"
        bad=1 ;;
      *) echo "test-fuzz: seed ${dir}/${name}: name it valid_* or bad_* (tests/fuzz/make_corpus.sh)"
        bad=1 ;;
    esac
  done
  return "${bad}"
}

# Prints the inputs libFuzzer saved for a target (base64 when small) and how to replay them.
show_artifacts() {  # target binary
  local target="$1" bin="$2" file
  for file in "${ARTIFACTS}/${target}"/*; do
    [[ -f "${file}" ]] || continue
    echo "---- reproduce: ${bin} ${file}"
    if [[ $(stat -c %s "${file}") -le 16384 ]]; then
      echo "---- $(basename "${file}") as base64 (base64 -d > input.bin; ${bin} input.bin):"
      base64 -w 100 "${file}"
    fi
  done
}

failed=()
summary=()
for target in ${TARGETS}; do
  bin="${BUILD}/bin/fuzz_${target}"
  seeds="tests/fuzz/corpus/${target}"
  [[ -x "${bin}" ]] || { echo "test-fuzz: ${bin} was not built" >&2; exit 1; }
  [[ -d "${seeds}" ]] || { echo "test-fuzz: no seed corpus ${seeds}" >&2; exit 1; }
  rm -rf "${ARTIFACTS:?}/${target}"  # only this run's findings are shown and kept
  mkdir -p "${WORK}/${target}/corpus" "${ARTIFACTS}/${target}"
  if ! check_seeds "${target}" "${bin}" "${seeds}"; then
    failed+=("${target}")
    summary+=("$(printf 'fuzz %-16s FAIL  seeds misjudged (see above)' "${target}")")
    continue
  fi
  cp -r "${seeds}/." "${WORK}/${target}/corpus/"
  seed_count=$(find "${seeds}" -type f | wc -l)
  dict=()
  [[ -f "tests/fuzz/${target}.dict" ]] && dict=("-dict=tests/fuzz/${target}.dict")
  log="${WORK}/${target}/log"
  rc=0
  "${bin}" -max_total_time="${SECONDS_EACH}" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="${ARTIFACTS}/${target}/" "${dict[@]}" \
    "${WORK}/${target}/corpus" >"${log}" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "${log}" | tail -1 | cut -d' ' -f2)
  corpus=$(find "${WORK}/${target}/corpus" -type f | wc -l)
  if [[ ${rc} -ne 0 ]] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|FUZZ_CHECK failed' "${log}"; then
    failed+=("${target}")
    echo "---- fuzz_${target} FAILED (exit ${rc}); last lines of its log:"
    tail -n 60 "${log}"
    show_artifacts "${target}" "${bin}"
    summary+=("$(printf 'fuzz %-16s FAIL  %4ss  runs %-9s cov %-6s (see above)' "${target}" "${SECONDS_EACH}" "${runs:-?}" "${cov:-?}")")
  else
    summary+=("$(printf 'fuzz %-16s ok    %4ss  runs %-9s cov %-6s corpus %s -> %s' "${target}" "${SECONDS_EACH}" "${runs:-?}" "${cov:-?}" "${seed_count}" "${corpus}")")
  fi
done

end=$(date +%s)
printf '%s\n' "${summary[@]}"
echo "test-fuzz: build $((built - start)) s, fuzzing $((end - built)) s, total $((end - start)) s"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "test-fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "test-fuzz: all ${TARGETS// /, } passed"
