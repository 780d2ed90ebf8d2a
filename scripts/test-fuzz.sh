#!/usr/bin/env bash
# `make test-fuzz`: builds the libFuzzer targets of tests/fuzz with clang (build dir
# build-fuzz, the whole build instrumented with -fsanitize=fuzzer-no-link,address,undefined)
# and runs each for a bounded time from a temporary copy of its seed corpus, so the
# repository is never modified. Fails when any target crashes, leaks, trips a sanitizer or
# breaks one of its invariants; the input that did it is kept under
# <build>/fuzz-artifacts/<target>/ with the last lines of the log printed.
#
# Environment: FUZZ_SECONDS (per target, default 30), FUZZ_TARGETS (space-separated, default
# all), FUZZ_BUILD (default build-fuzz), JOBS (build parallelism, default nproc).
# Reproduce a crash: <build>/bin/fuzz_<target> <build>/fuzz-artifacts/<target>/crash-...
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
BUILD="${FUZZ_BUILD:-build-fuzz}"
SECONDS_EACH="${FUZZ_SECONDS:-30}"
TARGETS="${FUZZ_TARGETS:-request_decoder config safetensors model_spec}"
JOBS="${JOBS:-$(nproc)}"

for tool in clang clang++ cmake ninja; do
  command -v "${tool}" >/dev/null || { echo "test-fuzz: ${tool} not found (scripts/install-deps.sh)" >&2; exit 1; }
done

start=$(date +%s)
if [[ ! -f "${BUILD}/build.ninja" ]]; then
  CC=clang CXX=clang++ cmake -S . -B "${BUILD}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFUSERANK_CUDA=OFF -DFUSERANK_FUZZ=ON >/dev/null
fi
cmake --build "${BUILD}" --target fuzzers -j "${JOBS}"
built=$(date +%s)

WORK="$(mktemp -d "${TMPDIR:-/tmp}/fuserank-fuzz.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT
ARTIFACTS="${ROOT}/${BUILD}/fuzz-artifacts"
# Sanitizer findings are crashes; leaks count (libFuzzer checks them per input too).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"

failed=()
summary=()
for target in ${TARGETS}; do
  bin="${BUILD}/bin/fuzz_${target}"
  seeds="tests/fuzz/corpus/${target}"
  [[ -x "${bin}" ]] || { echo "test-fuzz: ${bin} was not built" >&2; exit 1; }
  [[ -d "${seeds}" ]] || { echo "test-fuzz: no seed corpus ${seeds}" >&2; exit 1; }
  mkdir -p "${WORK}/${target}/corpus" "${ARTIFACTS}/${target}"
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
    echo "---- input(s) kept in ${ARTIFACTS}/${target}/:"
    ls "${ARTIFACTS}/${target}/" || true
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
