#!/usr/bin/env python3
"""ONNX Runtime reference service: fuserank.v1.Ranker in Python grpcio + onnxruntime.

The second peer fuserank is measured against (bench/run_peer_bench.sh), beside the PyTorch
peer: the model exported by tools/fuserank_onnx_export.py, requests decoded as the
PyTorch peer decodes them (bench/peers/ort_dlrm.py). Run with the bench venv's python:
  build/venv-peers/bin/python bench/peers/ort_peer.py --model=bench/out/model/bench.yaml \
      --onnx=bench/out/peers/bench.onnx --listen=127.0.0.1:8711 [--threads=1] [--workers=4]
--threads is the session's intra-op thread count (one session, shared by the handlers);
--workers the gRPC handler threads. Prints "ort_peer: listening on HOST:PORT" once it serves.
"""

import argparse
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="model spec YAML")
    p.add_argument("--listen", default="127.0.0.1:8710", help="host:port (port 0: any)")
    p.add_argument("--onnx", required=True, help="the model exported to ONNX")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    p.add_argument("--workers", type=int, default=4, help="gRPC handler threads")
    return p.parse_args()


def main():
    args = parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch  # decode_request's tensors only

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import peer_service
    import ort_dlrm

    torch.set_num_threads(1)
    started = time.perf_counter()
    model = ort_dlrm.OrtDlrm(args.model, args.onnx, args.threads)
    print(f"ort_peer: loaded {model.spec.name} v{model.spec.version} in "
          f"{time.perf_counter() - started:.1f} s", flush=True)

    peer_service.serve("ort_peer", model.spec, lambda request: ort_dlrm.rank(model, request),
                       args.listen, args.workers)


if __name__ == "__main__":
    main()
