#!/usr/bin/python3
"""PyTorch reference service: fuserank.v1.Ranker in Python grpcio + torch eager.

The peer that fuserank is measured against (bench/run_cpu_bench.sh). It loads the same
model files (spec YAML + safetensors) and scores like SPEC section 2:
  /usr/bin/python3 bench/peers/torch_peer.py --model=bench/out/model/bench.yaml \
      --listen=127.0.0.1:8710 [--threads=1] [--workers=4]
--threads is torch's (and OpenBLAS's) intra-op thread count; --workers the gRPC handler
threads. Prints "torch_peer: listening on HOST:PORT" once it serves.
"""

import argparse
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="model spec YAML")
    p.add_argument("--listen", default="127.0.0.1:8710", help="host:port (port 0: any)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--workers", type=int, default=4, help="gRPC handler threads")
    return p.parse_args()


def main():
    args = parse_args()
    # OpenBLAS sizes its pool when loaded, before torch.set_num_threads can apply.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import peer_service
    import torch_dlrm

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    model = torch_dlrm.TorchDlrm(args.model)
    print(f"torch_peer: loaded {model.spec.name} v{model.spec.version} in "
          f"{time.perf_counter() - started:.1f} s", flush=True)

    peer_service.serve("torch_peer", model.spec, lambda request: torch_dlrm.rank(model, request),
                       args.listen, args.workers)


if __name__ == "__main__":
    main()
