#!/usr/bin/env bash
# The bench half of the GPU check (check.sh run bench), on the GPU machine from the bundle:
#   1. fuserank-gpu-bench: copy bandwidth, fused lookup bandwidth, per-batch device time at
#      16/256/1024 candidates with graphs on and off (the L2 flushed before each run, and
#      warm), launches per batch;
#   2. the PyTorch peer on the same GPU, eager and CUDA-graphed (the image's own PyTorch),
#      the L2 flushed and warm likewise;
#   3. the server end to end on the GPU (server_e2e.sh): scores against the same server on
#      the CPU, closed-loop load through gRPC, and a /metrics check;
#   4. the server under engine settings (server_sweep.sh): qps, p99 and where a call's time
#      goes, at 256 candidates;
#   5. reload under load (server_reload.sh): failed requests and p99 while the file watch
#      loads new versions, against steady windows.
# The table and the verdict (summarize.py bench) come last; the exit status matches.
# Environment: OUT (logs), BUNDLE, CHECK_BUDGET_S (280: the whole run's time budget).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/check_lib.sh"
DEADLINE=$((SECONDS + ${CHECK_BUDGET_S:-280}))
mkdir -p "$OUT"
: >"$OUT/steps.tsv"
setup_env

step gpu_bench 100 gpu_bench.log "$BUNDLE/bin/fuserank-gpu-bench"
step torch_peer 70 torch_peer.log env LD_LIBRARY_PATH="$IMAGE_LD_LIBRARY_PATH" PYTHONUNBUFFERED=1 \
  python3 "$HERE/torch_peer_gpu.py"
step server_e2e 150 server_e2e.log env BIN="$BUNDLE/bin" E2E_DEVICE=cuda bash "$HERE/server_e2e.sh"
step server_sweep 170 server_sweep.log env BIN="$BUNDLE/bin" E2E_DEVICE=cuda bash "$HERE/server_sweep.sh"
step server_reload 90 server_reload.log env BIN="$BUNDLE/bin" E2E_DEVICE=cuda bash "$HERE/server_reload.sh"
python3 "$HERE/summarize.py" bench "$OUT" | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
