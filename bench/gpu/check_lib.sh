# Shared by the halves of the GPU check that run on the GPU machine (run_tests.sh,
# run_bench.sh): the step runner and the environment. Source it; it sets nothing else.
#
# step NAME CAP LOG CMD...: runs CMD with its output in $OUT/LOG, under a time limit of CAP
# seconds or what is left of the run's budget ($DEADLINE, in $SECONDS) if less, and appends
# "NAME<TAB>rc<TAB>seconds<TAB>LOG" to $OUT/steps.tsv (rc 125: not started, the budget is
# spent; 124/137: timed out). Returns CMD's exit status.
step() {
  local name=$1 cap=$2 log=$3
  shift 3
  local left=$((DEADLINE - SECONDS)) limit=$cap rc t0=$SECONDS
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    echo "not started: the run's time budget is spent" >"$OUT/$log"
    printf '%s\t125\t0\t%s\n' "$name" "$log" >>"$OUT/steps.tsv"
    echo "== $name: not started (time budget spent)"
    return 125
  fi
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=5 "$limit" "$@" >"$OUT/$log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" "$log" >>"$OUT/steps.tsv"
  echo "   rc=$rc in $((SECONDS - t0))s ($log)"
  return $rc
}

# Sets LD_LIBRARY_PATH for the bundle (keeping the image's own in IMAGE_LD_LIBRARY_PATH for
# PyTorch) and writes $OUT/env.txt: the GPU, the libraries found, the bundle's manifest.
setup_env() {
  export IMAGE_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
  export LD_LIBRARY_PATH="$BUNDLE/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  if ! ldconfig -p 2>/dev/null | grep -q 'libcublasLt.so.13' &&
    [[ ! -e /usr/local/cuda/lib64/libcublasLt.so.13 ]]; then
    local torch_cublas
    torch_cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
    [[ -n $torch_cublas ]] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$torch_cublas"
  fi
  export FUSERANK_CUDA_MODULE="$BUNDLE/lib/libfuserank_cuda.so"
  export FUSERANK_REQUIRE_GPU=1
  {
    date -u +%FT%TZ
    nvidia-smi 2>&1
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    command -v compute-sanitizer && compute-sanitizer --version 2>&1 | tail -n 2
    cat "$BUNDLE/MANIFEST"
  } >"$OUT/env.txt" 2>&1
}

# ldd of every bundled binary and library: prints each "not found"; exit 1 if there is any.
# (Exported: step runs it as `bash -c check_libraries`.)
check_libraries() {
  local f out missing=0
  for f in "$BUNDLE"/bin/* "$BUNDLE"/lib/libfuserank_cuda.so; do
    out=$(ldd "$f" 2>&1 | grep 'not found')
    if [[ -n $out ]]; then
      echo "$(basename "$f"): $out"
      missing=1
    fi
  done
  if ((missing == 0)); then echo "every library of the bundle resolves"; fi
  return $missing
}
export -f check_libraries
