#!/usr/bin/env bash
# `make test-sanitize`: the C++ test suite (engine_tests, server_tests, e2e_tests; ctest
# labels unit and e2e) under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan) and
# under ThreadSanitizer (build-tsan), both built with g++ (the project's compiler; clang 14
# rejects some of the C++20 the tests use), -O1 -g1 and -DFUSERANK_CUDA=OFF. Only the
# binaries the chosen labels need are built. In build-asan the product's code has ASan and
# UBSan, the tests and the generated protobuf code ASan alone
# (FUSERANK_SANITIZE_NONPRODUCT): UBSan there would double the build and check nothing of
# ours; under TSan everything is instrumented, as TSan needs. Any sanitizer report fails the
# test that produced it (UBSan does not recover; LeakSanitizer is on; TSan halts on the
# first race),
# ctest prints the report, and the script prints the command that reruns each failed test
# alone under the same sanitizer options, then exits 1.
#
# Abseil and gRPC come from Debian, built without TSan, so TSan cannot see absl::Mutex,
# CondVar and Notification synchronise: tests/sanitize/tsan_absl_sync.cc is preloaded into
# the TSan runs to tell TSan about them (see that file). tests/sanitize/{lsan,tsan}.supp
# hold suppressions for third-party code only, each with its reason.
#
# Both halves run labels unit and e2e. The e2e tests drive the server through gRPC, whose
# core hands each call between its threads in code TSan cannot see; the services that
# finish calls off gRPC's threads mark their Finish() -> OnDone() hand-off for TSan
# (server/tsan_handoff.h), and
# tests/sanitize/tsan.supp covers gRPC's inline API.
#
# Environment: SANITIZE_MODES ("asan tsan" by default; "asan" or "tsan" for one),
# ASAN_LABELS / TSAN_LABELS (ctest -L regexes, both default '^(unit|e2e)$'),
# JOBS (build and ctest parallelism, default nproc), SANITIZE_TIMEOUT (per test, default
# 900 s), CTEST_ARGS (extra ctest arguments, e.g. "-R Batcher"). A ctest run that selects no
# test fails (--no-tests=error), and so, with CI set, does a test skipped that CI should run
# (scripts/check_skips.py, as in `make test`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
if [[ $# -gt 0 ]]; then
  # Options are environment variables; print the header above for --help (and anything else).
  sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  [[ "$1" == -h || "$1" == --help ]] && exit 0
  echo "test-sanitize: takes no arguments (settings are environment variables, above)" >&2
  exit 2
fi
MODES="${SANITIZE_MODES:-asan tsan}"
JOBS="${JOBS:-$(nproc)}"
TIMEOUT="${SANITIZE_TIMEOUT:-900}"
BINARIES=(engine_tests server_tests e2e_tests)

for tool in gcc g++ cmake ninja ctest python3; do
  command -v "${tool}" >/dev/null || { echo "test-sanitize: ${tool} not found (scripts/install-deps.sh)" >&2; exit 1; }
done

# ctest -E pattern for every registered test that is not run by one of BINARIES (Python and
# tool tests: nothing in them is instrumented, and they need targets not built here).
exclude_pattern() {
  ctest --test-dir "$1" --show-only=json-v1 | python3 -c '
import json, os, re, sys
binaries = set(sys.argv[1:])
names = []
for test in json.load(sys.stdin).get("tests", []):
    command = test.get("command") or [""]
    if os.path.basename(command[0]) not in binaries:
        names.append(re.escape(test["name"]))
print("^(" + "|".join(names) + ")$" if names else "^$")
' "${BINARIES[@]}"
}

# The targets to build for a ctest label regex: the test binaries of the labels it matches
# and the programs those tests start (e2e: the server; unit: model_test runs the generator).
targets_for() {
  local labels="$1" targets=()
  if [[ unit =~ ${labels} ]]; then targets+=(engine_tests server_tests fuserank-gen-model); fi
  if [[ e2e =~ ${labels} ]]; then targets+=(e2e_tests fuserank-server); fi
  echo "${targets[@]}"
}

# After a failed ctest run: one command per failed test that reruns it alone, with the
# sanitizer environment of the run (paths absolute, so it works from any directory).
print_reproducers() {  # build_dir env...
  local dir="$1"
  shift
  local failed_log="${dir}/Testing/Temporary/LastTestsFailed.log"
  [[ -f "${failed_log}" ]] || return 0
  echo "==== reproduce each failed test alone:"
  ctest --test-dir "${dir}" --show-only=json-v1 | python3 -c '
import json, shlex, sys
failed = {line.split(":", 1)[1].strip() for line in open(sys.argv[1]) if ":" in line}
env = " ".join(shlex.quote(e) for e in sys.argv[2:])
for test in json.load(sys.stdin).get("tests", []):
    if test["name"] in failed:
        cwd = next((p["value"] for p in test.get("properties", [])
                    if p["name"] == "WORKING_DIRECTORY"), ".")
        command = shlex.join(test["command"])
        print(f"  (cd {shlex.quote(cwd)} && env {env} {command})")
' "${failed_log}" "$@"
}

summary=()
failed=()
for mode in ${MODES}; do
  case "${mode}" in
    asan) dir=build-asan; flags=address,undefined; nonproduct=address ;;
    tsan) dir=build-tsan; flags=thread; nonproduct=thread ;;
    *) echo "test-sanitize: unknown mode '${mode}' (asan, tsan)" >&2; exit 1 ;;
  esac
  labels="${ASAN_LABELS:-^(unit|e2e)\$}"
  [[ "${mode}" == tsan ]] && labels="${TSAN_LABELS:-^(unit|e2e)\$}"
  read -r -a targets <<<"$(targets_for "${labels}")"
  if [[ ${#targets[@]} -eq 0 ]]; then
    echo "test-sanitize: label regex '${labels}' matches neither unit nor e2e" >&2
    exit 1
  fi
  start=$(date +%s)
  echo "==== ${mode}: configure and build ${dir} (-fsanitize=${flags}): ${targets[*]}"
  # Configured every time, so a build dir of older flags takes these (a no-op otherwise).
  # -O1 -g1 (line tables: reports keep file and line) builds in half the time of -O2 -g.
  CC=gcc CXX=g++ cmake -S . -B "${dir}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DFUSERANK_CUDA=OFF -DFUSERANK_SANITIZE="${flags}" -DFUSERANK_SANITIZE_NONPRODUCT="${nonproduct}" \
    -DCMAKE_CXX_FLAGS="-fno-sanitize-recover=all" >/dev/null
  cmake --build "${dir}" --target "${targets[@]}" -j "${JOBS}"

  env=()
  case "${mode}" in
    asan)
      env=(ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:abort_on_error=1"
           LSAN_OPTIONS="suppressions=${ROOT}/tests/sanitize/lsan.supp:print_suppressions=0"
           UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
      ;;
    tsan)
      shim="${dir}/lib/libfuserank_tsan_absl_sync.so"
      mkdir -p "${dir}/lib"
      if [[ ! -f "${shim}" || tests/sanitize/tsan_absl_sync.cc -nt "${shim}" ]]; then
        g++ -std=c++20 -O1 -fPIC -shared -o "${shim}" tests/sanitize/tsan_absl_sync.cc -ldl
      fi
      env=(LD_PRELOAD="${ROOT}/${shim}"
           TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=${ROOT}/tests/sanitize/tsan.supp")
      ;;
  esac
  built=$(date +%s)

  exclude="$(exclude_pattern "${dir}")"
  echo "==== ${mode}: ctest -L '${labels}' in ${dir} (not run here: ${exclude})"
  rc=0
  junit="${ROOT}/${dir}/Testing/ctest-junit.xml"
  rm -f "${dir}/Testing/Temporary/LastTestsFailed.log" "${junit}"
  # shellcheck disable=SC2086
  env "${env[@]}" ctest --test-dir "${dir}" -L "${labels}" -E "${exclude}" --no-tests=error \
    --output-junit "${junit}" --output-on-failure -j "${JOBS}" --timeout "${TIMEOUT}" \
    ${CTEST_ARGS:-} || rc=$?
  end=$(date +%s)
  status=ok
  if [[ ${rc} -ne 0 ]]; then
    status=FAIL
    print_reproducers "${dir}" "${env[@]}"
  fi
  # Skipped tests that CI should run fail the pass with CI set (without the sanitizer's env).
  if [[ ! -f "${junit}" ]] ||
    ! python3 scripts/check_skips.py --build "${dir}" --junit "${junit}"; then
    status=FAIL
  fi
  [[ "${status}" == ok ]] || failed+=("${mode}")
  summary+=("$(printf 'sanitize %-5s %-4s build %4d s, tests %4d s (%s)' "${mode}" "${status}" \
    $((built - start)) $((end - built)) "${flags}")")
done

printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "test-sanitize: FAILED: ${failed[*]}"
  exit 1
fi
echo "test-sanitize: passed (${MODES})"
