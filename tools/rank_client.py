#!/usr/bin/python3
"""Calls fuserank's Ranker.Rank with a random valid request built from a model spec.

Usage (Debian's python3 with python3-grpcio, python3-grpc-tools, python3-yaml):
  /usr/bin/python3 tools/rank_client.py --target 127.0.0.1:8700 \
      --model config/models/demo.yaml --candidates 5 --top_k 3

Prints the response as JSON. Stubs are generated from proto/ into a temporary folder.
"""
import argparse
import json
import os
import random
import sys
import tempfile

import grpc
import yaml
from grpc_tools import protoc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_stubs():
    out = tempfile.mkdtemp(prefix="fuserank_stubs_")
    proto_dir = os.path.join(ROOT, "proto")
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    args = ["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out}",
            f"--grpc_python_out={out}", "fuserank/v1/ranker.proto"]
    if protoc.main(args) != 0:
        sys.exit("rank_client: protoc failed on proto/fuserank/v1/ranker.proto")
    sys.path.insert(0, out)
    from fuserank.v1 import ranker_pb2, ranker_pb2_grpc  # noqa: E402
    return ranker_pb2, ranker_pb2_grpc


def build_request(pb, spec, candidates, top_k, rng):
    req = pb.RankRequest(request_id=f"rank-client-{rng.randrange(1 << 30)}", top_k=top_k)
    dense = spec.get("dense") or {}
    for table in spec["tables"]:
        if table["side"] == "user":
            req.user_features.add(name=table["name"], ids=[rng.randrange(table["rows"])])
    req.user_dense.extend(rng.random() for _ in range(dense.get("user", 0)))
    for c in range(candidates):
        cand = req.candidates.add(item_id=1000 + c)
        for table in spec["tables"]:
            if table["side"] == "item":
                cand.features.add(name=table["name"], ids=[rng.randrange(table["rows"])])
        cand.dense.extend(rng.random() for _ in range(dense.get("item", 0)))
    return req


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:8700")
    parser.add_argument("--model", default=os.path.join(ROOT, "config/models/demo.yaml"),
                        help="the model spec YAML the server serves (to build valid ids)")
    parser.add_argument("--model-name", default="", help="RankRequest.model (empty: default)")
    parser.add_argument("--candidates", type=int, default=5)
    parser.add_argument("--top_k", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args()

    with open(args.model) as f:
        spec = yaml.safe_load(f)
    pb, pb_grpc = load_stubs()
    req = build_request(pb, spec, args.candidates, args.top_k, random.Random(args.seed))
    req.model = args.model_name
    with grpc.insecure_channel(args.target) as channel:
        try:
            resp = pb_grpc.RankerStub(channel).Rank(req, timeout=args.timeout)
        except grpc.RpcError as e:
            print(f"rank_client: {e.code().name}: {e.details()}", file=sys.stderr)
            return 1
    items = [{"item_id": i.item_id, "score": i.score, "index": i.index} for i in resp.items]
    print(json.dumps({"model_version": resp.model_version, "items": items}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
