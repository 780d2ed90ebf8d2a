#!/usr/bin/env bash
# `make configure` (and so `make build`, `make test`, `make serve`): configures BUILD_DIR with
# cmake -G Ninja when it has no build.ninja yet, when BUILD_TYPE or CUDA differ from what its
# CMakeCache.txt holds, or when more cmake arguments (the Makefile's CMAKE_FLAGS) are given;
# otherwise does nothing, as ninja re-runs cmake itself when a CMakeLists.txt changes. A -D
# value once given stays in the cache until given again or the build dir is removed
# (`make clean`).
#
# usage: scripts/configure.sh BUILD_DIR BUILD_TYPE CUDA [cmake arguments...]
#   e.g. scripts/configure.sh build Release AUTO -DCMAKE_CUDA_ARCHITECTURES=90
set -euo pipefail

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
}
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  usage
  exit 0
fi
if [[ $# -lt 3 ]]; then
  usage >&2
  exit 2
fi
cd "$(dirname "$0")/.."
dir="$1" type="$2" cuda="$3"
shift 3

cached() {  # the value of a CMakeCache.txt entry, empty if none
  sed -n "s/^$1:[A-Z]*=//p" "${dir}/CMakeCache.txt" 2>/dev/null | head -n 1
}
why=""
if [[ ! -f "${dir}/build.ninja" ]]; then
  why="no ${dir}/build.ninja yet"
elif [[ $# -gt 0 ]]; then
  why="cmake arguments given: $*"
elif [[ "$(cached CMAKE_BUILD_TYPE)" != "${type}" ]]; then
  why="BUILD_TYPE=${type}, the cache has '$(cached CMAKE_BUILD_TYPE)'"
elif [[ "$(cached FUSERANK_CUDA)" != "${cuda}" ]]; then
  why="CUDA=${cuda}, the cache has '$(cached FUSERANK_CUDA)'"
fi
if [[ -z "${why}" ]]; then
  exit 0
fi
echo "configure ${dir} (${why})"
exec cmake -S . -B "${dir}" -G Ninja -DCMAKE_BUILD_TYPE="${type}" -DFUSERANK_CUDA="${cuda}" "$@"
