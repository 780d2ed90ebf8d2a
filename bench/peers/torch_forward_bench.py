#!/usr/bin/python3
"""PyTorch eager forward alone (no gRPC): the reference figures of the CPU suite.

  /usr/bin/python3 bench/peers/torch_forward_bench.py --model=bench/out/model/bench.yaml \
      [--candidates=16,256] [--threads=1] [--seconds=3] [--json]
Times model(batch) on pre-decoded batches (Zipf ids, alpha 1.05) and, separately, the
Python decode of a RankRequest into tensors that the peer service also pays. The last
stdout line is JSON with --json.
"""

import argparse
import json
import os
import statistics
import sys
import time


def timed(fn, items, seconds, warmup=10):
    for i in range(warmup):
        fn(items[i % len(items)])
    samples, deadline, i = [], time.perf_counter() + seconds, 0
    while time.perf_counter() < deadline or len(samples) < 20:
        start = time.perf_counter()
        fn(items[i % len(items)])
        samples.append(time.perf_counter() - start)
        i += 1
    samples.sort()
    q = lambda p: samples[min(len(samples) - 1, int(p * len(samples)))] * 1e3
    return {"median_ms": statistics.median(samples) * 1e3, "p10_ms": q(0.1), "p90_ms": q(0.9),
            "iterations": len(samples)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--candidates", default="16,256")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per size")
    p.add_argument("--zipf", type=float, default=1.05)
    p.add_argument("--pool", type=int, default=32, help="distinct requests per size")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import numpy as np
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import proto_stubs
    import torch_dlrm
    import workload

    torch.set_num_threads(args.threads)
    pb2, _ = proto_stubs.load()
    model = torch_dlrm.TorchDlrm(args.model)
    rng = np.random.default_rng(args.seed)
    samplers = workload.samplers_for(model.spec, args.zipf, rng)
    results = []
    for n in [int(c) for c in args.candidates.split(",")]:
        requests = [workload.make_request(pb2, model.spec, samplers, rng, n) for _ in range(args.pool)]
        batches = [torch_dlrm.decode_request(model, r) for r in requests]
        with torch.inference_mode():
            forward = timed(model, batches, args.seconds)
        decode = timed(lambda r: torch_dlrm.decode_request(model, r), requests, args.seconds / 2)
        row = {"candidates": n, "forward_ms": forward["median_ms"],
               "forward_p10_ms": forward["p10_ms"], "forward_p90_ms": forward["p90_ms"],
               "forward_iterations": forward["iterations"],
               "candidates_per_s": n / forward["median_ms"] * 1e3,
               "decode_ms": decode["median_ms"]}
        results.append(row)
        print(f"torch eager, {args.threads} thread(s), {n} candidates: forward median "
              f"{row['forward_ms']:.3f} ms (p10 {row['forward_p10_ms']:.3f}, p90 "
              f"{row['forward_p90_ms']:.3f}; {row['candidates_per_s']:.0f} candidates/s), "
              f"python decode {row['decode_ms']:.3f} ms", flush=True)
    if args.json:
        print(json.dumps({"torch": torch.__version__, "threads": args.threads,
                          "pool": args.pool, "model": model.spec.name, "results": results}))


if __name__ == "__main__":
    main()
