#!/usr/bin/env bash
# The GPU check of issue 4 in two halves.
#
#   bench/gpu/check.sh bundle   here (no GPU needed): builds Release for sm_90 with the
#                               CUDA backend and collects gpu_tests, fuserank-gpu-bench,
#                               fuserank-server, libfuserank_cuda.so and the non-system
#                               shared libraries they load into ./.bundle (stripped,
#                               ignored by git, < 64 MiB).
#   bench/gpu/check.sh run      on the GPU machine, from the repository root with
#                               .bundle carried: GPU tests, one memcheck run, the kernel
#                               and per-batch benchmarks, the PyTorch peer; logs into
#                               $OUT (default bench/out/gpu); a short table printed last.
#                               Stays under 8 minutes (each step has a timeout).
# Environment: BUILD_DIR (build-cuda), CUDA_ARCH (90), JOBS (2), OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUNDLE=$ROOT/.bundle

bundle() {
  set -e
  local build=$ROOT/${BUILD_DIR:-build-cuda}
  cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSERANK_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >/dev/null
  cmake --build "$build" -j "${JOBS:-2}" --target gpu_tests fuserank-gpu-bench fuserank_cuda \
    fuserank-server
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
  cp "$build/bin/gpu_tests" "$build/bin/fuserank-gpu-bench" "$build/bin/fuserank-server" \
    "$BUNDLE/bin/"
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
  { echo "built $(date -u +%FT%TZ) from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
    echo "cuda arch ${CUDA_ARCH:-90}"; ls -l "$BUNDLE/bin" "$BUNDLE/lib"; } >"$BUNDLE/MANIFEST"
  local kib
  kib=$(du -sk "$BUNDLE" | cut -f1)
  echo "bundle: $BUNDLE, $((kib / 1024)) MiB, $(ls "$BUNDLE/lib" | wc -l) libraries"
  if ((kib > 60 * 1024)); then
    echo "bundle is over 60 MiB: it will not travel with the tree" >&2
    return 1
  fi
}

# Runs one step with a time limit; notes its exit status in $OUT/steps.txt.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$SECONDS
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=5 "$limit" "$@" >"$OUT/$log" 2>&1
  local rc=$?
  printf '%-12s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" "$log" | tee -a "$OUT/steps.txt"
  tail -n 3 "$OUT/$log"
}

run() {
  OUT=${OUT:-$ROOT/bench/out/gpu}
  mkdir -p "$OUT"
  : >"$OUT/steps.txt"
  [[ -x $BUNDLE/bin/gpu_tests ]] || { echo "no bundle at $BUNDLE: run 'check.sh bundle' first" >&2; exit 1; }
  local image_ld=${LD_LIBRARY_PATH:-}  # PyTorch runs on the image's own libraries
  export LD_LIBRARY_PATH="$BUNDLE/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  if ! ldconfig -p | grep -q 'libcublasLt.so.13' && [[ ! -e /usr/local/cuda/lib64/libcublasLt.so.13 ]]; then
    local torch_cublas
    torch_cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
    [[ -n $torch_cublas ]] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$torch_cublas"
  fi
  {
    nvidia-smi
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    ldd "$BUNDLE/lib/libfuserank_cuda.so" "$BUNDLE/bin/gpu_tests"
    cat "$BUNDLE/MANIFEST"
  } >"$OUT/env.txt" 2>&1
  cd "$ROOT" || exit 1
  step "gpu_tests" 170 gpu_tests.log "$BUNDLE/bin/gpu_tests" --gtest_brief=1
  if command -v compute-sanitizer >/dev/null; then
    step "memcheck" 75 memcheck.log compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$BUNDLE/bin/gpu_tests" --gtest_brief=1 \
      --gtest_filter='Tables/LookupKernelTest.*/fp16_dim12_reorder:Widths/DotKernelTest.*/dim12_noz:Sizes/TopKKernelTest.*/127_128_129_ties:Models/CudaPipelineTest.*/dot_fp32_dim32_graphs'
  fi
  step "gpu_bench" 130 gpu_bench.log "$BUNDLE/bin/fuserank-gpu-bench"
  step "torch_peer" 100 torch_peer.log env LD_LIBRARY_PATH="$image_ld" PYTHONUNBUFFERED=1 \
    python3 "$ROOT/bench/gpu/torch_peer_gpu.py"
  python3 "$ROOT/bench/gpu/summarize.py" "$OUT" | tee "$OUT/summary.txt"
}

case "${1:-}" in
  bundle) bundle ;;
  run) run ;;
  *)
    echo "usage: $0 bundle|run" >&2
    exit 2
    ;;
esac
