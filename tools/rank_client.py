#!/usr/bin/python3
"""Calls fuserank's Ranker.Rank with a random valid request built from a model spec.

Usage (Debian's python3 with python3-grpcio, python3-grpc-tools, python3-yaml):
  /usr/bin/python3 tools/rank_client.py --target 127.0.0.1:8700 \
      --model config/models/demo.yaml --candidates 5 --top_k 3
      [--tls] [--ca PEM] [--cert PEM --key PEM] [--remote-ids LO:HI]

Prints the response as JSON; on an error prints "rank_client: CODE: message" to stderr
and exits 1. Ids are drawn from each table's rows; a `storage: redis` table has no rows in
the spec, so its ids come from --remote-ids (the range loaded into the cluster). With TLS
on the server (server.tls covers the Ranker port), pass --ca (the server certificate's
CA) or --tls (the system's CA roots), and --cert/--key for mTLS. Stubs are generated from
proto/ into a temporary folder, removed once they are imported.
"""
import argparse
import json
import os
import random
import sys

import grpc
import yaml

from fuserank_client_common import ROOT, add_tls_arguments, load_stubs, open_channel


def id_range(text):
    """'LO:HI' (HI excluded) as (LO, HI)."""
    lo, sep, hi = text.partition(":")
    try:
        bounds = (int(lo), int(hi)) if sep else None
    except ValueError:
        bounds = None
    if bounds is None or not -2**63 <= bounds[0] < bounds[1] <= 2**63:
        raise argparse.ArgumentTypeError(f"'{text}': want LO:HI, int64 ids with LO < HI")
    return bounds


def count(limit):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = -1
        if not 0 <= value <= limit:
            raise argparse.ArgumentTypeError(f"'{text}': want an integer in 0..{limit}")
        return value
    return parse


def table_ids(parser, spec, remote_ids):
    """{table name: (lo, hi)} of the ids to draw from, for every table of the spec."""
    out = {}
    for table in spec.get("tables") or []:
        if "rows" in table:
            out[table["name"]] = (0, int(table["rows"]))
        elif table.get("storage") == "redis":
            if remote_ids is None:
                parser.error(f"table '{table['name']}' is storage: redis and has no rows in the "
                             "spec: give --remote-ids LO:HI, the ids loaded into the cluster")
            out[table["name"]] = remote_ids
        else:
            parser.error(f"table '{table.get('name')}': no rows in the spec")
    return out


def build_request(pb, spec, ids, candidates, top_k, rng):
    req = pb.RankRequest(request_id=f"rank-client-{rng.randrange(1 << 30)}", top_k=top_k)
    dense = spec.get("dense") or {}
    for table in spec["tables"]:
        if table["side"] == "user":
            req.user_features.add(name=table["name"], ids=[rng.randrange(*ids[table["name"]])])
    req.user_dense.extend(rng.random() for _ in range(dense.get("user", 0)))
    for c in range(candidates):
        cand = req.candidates.add(item_id=1000 + c)
        for table in spec["tables"]:
            if table["side"] == "item":
                cand.features.add(name=table["name"], ids=[rng.randrange(*ids[table["name"]])])
        cand.dense.extend(rng.random() for _ in range(dense.get("item", 0)))
    return req


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:8700")
    parser.add_argument("--model", default=os.path.join(ROOT, "config/models/demo.yaml"),
                        help="the model spec YAML the server serves (to build valid ids)")
    parser.add_argument("--model-name", default="", help="RankRequest.model (empty: default)")
    parser.add_argument("--candidates", type=count(1 << 20), default=5)
    parser.add_argument("--top_k", type=count(2**32 - 1), default=0,
                        help="0: every candidate, sorted")
    parser.add_argument("--remote-ids", type=id_range, metavar="LO:HI",
                        help="ids for storage: redis tables (required when there are any)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=5.0)
    add_tls_arguments(parser)
    args = parser.parse_args(argv)

    try:
        with open(args.model) as f:
            spec = yaml.safe_load(f)
    except OSError as e:
        parser.error(f"--model {args.model}: {e.strerror}")
    except yaml.YAMLError as e:
        parser.error(f"--model {args.model}: invalid YAML: {e}")
    if not isinstance(spec, dict) or not isinstance(spec.get("tables", []), list):
        parser.error(f"--model {args.model}: not a model spec (tables: ...)")
    ids = table_ids(parser, spec, args.remote_ids)
    channel = open_channel(parser, args)
    pb, pb_grpc = load_stubs("rank_client", "ranker")
    req = build_request(pb, spec, ids, args.candidates, args.top_k, random.Random(args.seed))
    req.model = args.model_name
    with channel:
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
