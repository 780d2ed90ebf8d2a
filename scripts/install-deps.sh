#!/usr/bin/env bash
# Installs every build, test and benchmark dependency of fuserank from Debian's archive.
# Idempotent: packages already present are skipped without touching apt.
set -euo pipefail

# redis-server / redis-tools: the storage: redis tests start their own cluster on free
# loopback ports (tests/testing/redis_cluster.h); a system service apt may start on 6379
# plays no part in them.
BUILD_PKGS=(cmake ninja-build pkg-config g++ make libgrpc++-dev protobuf-compiler-grpc
  libprotobuf-dev protobuf-compiler grpc-proto libabsl-dev libspdlog-dev prometheus-cpp-dev
  libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev curl clang-format libhiredis-dev)
TEST_PKGS=(prometheus python3-grpcio python3-grpc-tools python3-yaml python3-numpy
  python3-protobuf python3-torch libopenblas0-pthread clang libclang-rt-14-dev
  redis-server redis-tools)
# python3-venv: the PyPI venvs of the KServe and peer benches; python3-dev: the C++ that
# torch.compile (inductor) builds against Python.h.
BENCH_PKGS=(libopenblas-dev python3-matplotlib python3-venv python3-dev)

want=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}")
if [[ "${1:-}" == "--bench" ]]; then want+=("${BENCH_PKGS[@]}"); fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
