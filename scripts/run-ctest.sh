#!/usr/bin/env bash
# ctest as `make test` and `make test-unit` run it: fails when the arguments select no test
# (--no-tests=error: a mistyped -L or -R would otherwise pass running nothing), writes
# ctest's JUnit file to BUILD_DIR/Testing/ctest-junit.xml and then checks the skipped tests
# with scripts/check_skips.py: with CI set, a test skipped that a CI machine should run (not
# labelled gpu, not in scripts/ci-expected-skips.txt) fails the run.
#
# usage: scripts/run-ctest.sh BUILD_DIR [ctest arguments...]
#   e.g. scripts/run-ctest.sh build --output-on-failure -j 2 -L unit
set -euo pipefail

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  [[ $# -ge 1 ]] && exit 0
  exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$1"
shift
mkdir -p "${dir}/Testing"
junit="$(cd "${dir}" && pwd)/Testing/ctest-junit.xml"
rm -f "${junit}"  # never check the skips of an older run
rc=0
ctest --test-dir "${dir}" --no-tests=error --output-junit "${junit}" "$@" || rc=$?
if [[ -f "${junit}" ]]; then
  python3 "${ROOT}/scripts/check_skips.py" --build "${dir}" --junit "${junit}" || rc=$((rc ? rc : 1))
elif [[ ${rc} -eq 0 ]]; then
  echo "run-ctest: ctest wrote no ${junit}" >&2
  rc=1
fi
exit "${rc}"
