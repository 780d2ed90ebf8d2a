#!/usr/bin/python3
"""Sends the same requests to two fuserank.v1.Ranker services and compares the scores:
run_cpu_bench.sh uses it to show that fuserank and the PyTorch peer compute the same
model before it times them.

  /usr/bin/python3 bench/peers/compare_scores.py --model=bench/out/model/bench.yaml \
      --a=127.0.0.1:8700 --b=127.0.0.1:8710 [--json]
Exit 1 when a response differs in length or a score by more than --tolerance.
"""

import argparse
import json
import os
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--a", required=True, help="host:port")
    p.add_argument("--b", required=True, help="host:port")
    p.add_argument("--requests", type=int, default=5, help="requests per size")
    p.add_argument("--sizes", default="1,16,256")
    p.add_argument("--bag", type=int, default=3, help="ids per feature")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    import grpc
    import numpy as np

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import proto_stubs
    import torch_dlrm
    import workload

    pb2, pb2_grpc = proto_stubs.load()
    spec = torch_dlrm.ModelSpec(args.model)
    rng = np.random.default_rng(9)
    samplers = workload.samplers_for(spec, 1.05, rng)
    stubs = [pb2_grpc.RankerStub(grpc.insecure_channel(t)) for t in (args.a, args.b)]
    worst, order_mismatches, compared = 0.0, 0, 0
    for n in [int(s) for s in args.sizes.split(",")]:
        for _ in range(args.requests):
            request = workload.make_request(pb2, spec, samplers, rng, n, bag=args.bag, top_k=0)
            a, b = (s.Rank(request, timeout=30) for s in stubs)
            if len(a.items) != n or len(b.items) != n:
                sys.exit(f"compare_scores: {n} candidates: {len(a.items)} vs {len(b.items)} items")
            score_a = {i.index: i.score for i in a.items}
            score_b = {i.index: i.score for i in b.items}
            worst = max(worst, max(abs(score_a[i] - score_b[i]) for i in range(n)))
            order_mismatches += [i.index for i in a.items] != [i.index for i in b.items]
            compared += n
    result = {"candidates_compared": compared, "max_abs_score_diff": worst,
              "order_mismatches": order_mismatches, "bag": args.bag, "tolerance": args.tolerance}
    print(f"compare_scores: {compared} candidates, max |score a - score b| = {worst:.3g}, "
          f"{order_mismatches} responses ordered differently (near-ties may swap)")
    if args.json:
        print(json.dumps(result))
    sys.exit(0 if worst <= args.tolerance else 1)


if __name__ == "__main__":
    main()
