#!/usr/bin/env bash
# The GPU check, in two halves (docs/gpu.md, "Running the GPU check"):
#
#   bench/gpu/check.sh bundle      here (no GPU needed): builds Release for sm_90 with the
#                                  CUDA backend and collects the binaries below and the
#                                  non-system shared libraries they load into ./.bundle
#                                  (stripped, ignored by git, < 60 MiB).
#   bench/gpu/check.sh run tests   on the GPU machine, from the repository root with .bundle
#                                  carried: smoke, every GPU test suite in its own process,
#                                  memcheck (run_tests.sh); <= CHECK_BUDGET_S (270) s.
#   bench/gpu/check.sh run bench   on the GPU machine: kernel benchmarks, the PyTorch peer,
#                                  the server end to end on the GPU (run_bench.sh); <= 280 s.
#
# Each run writes its logs, XML reports and summary.txt into $OUT (default bench/out/gpu)
# and ends with one line, `gpu-check: PASS (...)` or `gpu-check: FAIL (...)`; the exit
# status matches it.
# Environment: BUILD_DIR (build-cuda), CUDA_ARCH (90), JOBS (2), OUT, CHECK_BUDGET_S.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export BUNDLE=$ROOT/.bundle
BINARIES=(gpu_tests fuserank-gpu-bench fuserank-server fuserank-bench fuserank-gen-model
  fuserank-score-compare)

bundle() {
  set -e
  local build=$ROOT/${BUILD_DIR:-build-cuda}
  cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSERANK_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >/dev/null
  cmake --build "$build" -j "${JOBS:-2}" --target "${BINARIES[@]}" fuserank_cuda
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
  local b
  for b in "${BINARIES[@]}"; do cp "$build/bin/$b" "$BUNDLE/bin/"; done
  cp "$build/lib/libfuserank_cuda.so" "$BUNDLE/lib/"
  # Shared libraries to carry: all but glibc, libstdc++/libgcc_s (newer on the GPU image)
  # and the CUDA libraries (the GPU image has its own).
  local skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libresolv\.so|libstdc\+\+|libgcc_s|libcuda|libcublas|libcudart|libnvrtc|libnvJitLink)'
  local f lib name
  for f in "$BUNDLE"/bin/* "$BUNDLE/lib/libfuserank_cuda.so"; do
    ldd "$f" | awk '/=> \// {print $3}' | while read -r lib; do
      name=$(basename "$lib")
      if [[ ! $name =~ $skip && ! -e $BUNDLE/lib/$name ]]; then cp -L "$lib" "$BUNDLE/lib/$name"; fi
    done
  done
  strip --strip-unneeded "$BUNDLE"/bin/* "$BUNDLE"/lib/*.so* 2>/dev/null || true
  { echo "built $(date -u +%FT%TZ) from $(git -C "$ROOT" describe --always --dirty 2>/dev/null)"
    echo "cuda arch ${CUDA_ARCH:-90}"; ls -l "$BUNDLE/bin" "$BUNDLE/lib"; } >"$BUNDLE/MANIFEST"
  # The device tool carries the bundle and the working tree (tracked and untracked files
  # git does not ignore; a tracked file deleted from the tree counts nothing) together,
  # 64 MiB in all.
  local kib tree_kib
  kib=$(du -sk "$BUNDLE" | cut -f1)
  tree_kib=$(git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
    (cd "$ROOT" && xargs -0 du -ck --apparent-size 2>/dev/null || true) |
    awk '$2 == "total" {s += $1} END {print s + 0}')
  echo "bundle: $BUNDLE, $((kib / 1024)) MiB, $(ls "$BUNDLE/lib" | wc -l) libraries;" \
    "with the working tree $(((kib + tree_kib) / 1024)) MiB of the 64 the device tool carries"
  if ((kib + tree_kib > 63 * 1024)); then
    echo "bundle and working tree are over 63 MiB: they will not travel together" >&2
    return 1
  fi
}

run() {
  export OUT=${OUT:-$ROOT/bench/out/gpu}
  mkdir -p "$OUT"
  if [[ ! -x $BUNDLE/bin/gpu_tests ]]; then
    echo "gpu-check: FAIL (no bundle at $BUNDLE: run 'bench/gpu/check.sh bundle' first and carry .bundle)"
    exit 1
  fi
  cd "$ROOT" || exit 1
  case "${1:-}" in
    tests) exec bash "$ROOT/bench/gpu/run_tests.sh" ;;
    bench) exec bash "$ROOT/bench/gpu/run_bench.sh" ;;
    *)
      echo "usage: $0 run tests|bench" >&2
      exit 2
      ;;
  esac
}

case "${1:-}" in
  bundle) bundle ;;
  run) run "${2:-}" ;;
  *)
    echo "usage: $0 bundle | run tests | run bench" >&2
    exit 2
    ;;
esac
