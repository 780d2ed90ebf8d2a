#!/usr/bin/env bash
# Installs every build, test and benchmark dependency of fuserank from Debian's archive.
# Idempotent: packages already present are skipped without touching apt.
#
# usage: scripts/install-deps.sh [--bench]
#   (none)    what `make serve`, `make test`, `make test-sanitize` and `make test-fuzz` need
#   --bench   also what the benchmarks need (`make bench`, `make bench-kserve`, `make bench-peers`)
#   -h, --help  this text; installs nothing
# Runs apt-get as root, or through sudo when not root. Waits up to 10 minutes for another
# apt/dpkg run to release its lock (two `make` runs on a fresh machine).
set -euo pipefail

usage() {
  sed -n '5,10p' "$0" | sed 's/^# \{0,1\}//'
}

# redis-server / redis-tools: the storage: redis tests start their own cluster on free
# loopback ports (tests/testing/redis_cluster.h); a system service apt may start on 6379
# plays no part in them.
BUILD_PKGS=(cmake ninja-build pkg-config g++ make libgrpc++-dev protobuf-compiler-grpc
  libprotobuf-dev protobuf-compiler grpc-proto libabsl-dev libspdlog-dev prometheus-cpp-dev
  libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev curl clang-format libhiredis-dev)
# python3-venv: the venv of tritonclient_e2e_test (tritonclient from PyPI; Debian's python3
# has no ensurepip without it). llvm-14: /usr/bin/llvm-symbolizer-14, which clang 14's ASan
# runtime calls to print the fuzz targets' crash stacks with function, file and line (it is
# only a Recommends of clang-14).
TEST_PKGS=(prometheus python3-grpcio python3-grpc-tools python3-yaml python3-numpy
  python3-protobuf python3-torch libopenblas0-pthread clang libclang-rt-14-dev llvm-14
  redis-server redis-tools python3-venv openssl)
# openssl (above): the certificates the client tools' TLS tests make. python3-venv: also
# the PyPI venvs of the KServe and peer benches; python3-dev: the C++ that torch.compile
# (inductor) builds against Python.h.
BENCH_PKGS=(libopenblas-dev python3-matplotlib python3-dev)

bench=0
for arg in "$@"; do
  case "${arg}" in
    --bench) bench=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "install-deps: unknown argument '${arg}'" >&2
      usage >&2
      exit 2
      ;;
  esac
done

want=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}")
if ((bench)); then want+=("${BENCH_PKGS[@]}"); fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: not root and no sudo: run 'scripts/install-deps.sh$( ((bench)) && echo ' --bench')' as root, or install sudo" >&2
    exit 1
  fi
  SUDO=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
# env inside sudo: sudo's env_reset would drop a DEBIAN_FRONTEND set before it.
APT=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
"${APT[@]}" update -qq
"${APT[@]}" install -y -qq --no-install-recommends "${missing[@]}"
