#!/usr/bin/python3
"""Calls fuserank's Ranker.Rank with a random valid request built from a model spec.

Usage (Debian's python3 with python3-grpcio, python3-grpc-tools, python3-yaml):
  /usr/bin/python3 tools/rank_client.py --target 127.0.0.1:8700 \
      --model config/models/demo.yaml --candidates 5 --top_k 3
      [--tls] [--ca PEM] [--cert PEM --key PEM] [--remote-ids LO:HI]

Prints the response as JSON; on an error prints "rank_client: CODE: message" to stderr
and exits 1. A --model file it cannot read or that is no model spec: one line naming the
file and the reason, exit 2. Ids are drawn from each table's rows; a `storage: redis` table has no rows in
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


class SpecError(Exception):
    """A --model file rank_client cannot build requests from: a one-line message naming
    the file and the reason (main prints it and exits 2)."""


ROOT_KEYS = ("name", "weights", "interaction", "top_mlp")  # the spec's required keys


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool)


def load_spec(path):
    """The model spec at `path`, checked for what requests are built from: tables (a list
    of {name, side, rows | storage: redis}) and dense: {user, item}."""
    try:
        with open(path, encoding="utf-8") as f:
            spec = yaml.safe_load(f)
    except OSError as e:
        raise SpecError(f"--model {path}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise SpecError(f"--model {path}: not a YAML text file (byte 0x{e.object[e.start]:02x} "
                        f"at offset {e.start} is not UTF-8)") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"--model {path}: invalid YAML{where}: {problem}") from e
    if not isinstance(spec, dict) or any(key not in spec for key in ROOT_KEYS):
        raise SpecError(f"--model {path}: not a model spec (want a map with "
                        f"{', '.join(k + ':' for k in ROOT_KEYS)} and tables:)")
    tables = spec.setdefault("tables", [])
    if not isinstance(tables, list):
        raise SpecError(f"--model {path}: tables: want a list of tables, got {tables!r:.60}")
    for i, table in enumerate(tables):
        where = f"--model {path}: tables[{i}]"
        if not isinstance(table, dict):
            raise SpecError(f"{where}: want a map like {{name: user_id, side: user, rows: 1000, "
                            f"dim: 16}}, got {table!r:.60}")
        if not isinstance(table.get("name"), str) or not table["name"]:
            raise SpecError(f"{where}.name: want a table name, got {table.get('name')!r:.60}")
        if table.get("side") not in ("user", "item"):
            raise SpecError(f"{where}.side: want user or item, got {table.get('side')!r:.60}")
        if "rows" in table and not (_count(table["rows"]) and table["rows"] >= 1):
            raise SpecError(f"{where}.rows: want a count >= 1, got {table['rows']!r:.60}")
    dense = spec.get("dense")
    if dense is None:
        dense = spec["dense"] = {}
    if not isinstance(dense, dict):
        raise SpecError(f"--model {path}: dense: want a map like {{user: 4, item: 3}}, got "
                        f"{dense!r:.60}")
    for side in ("user", "item"):
        if not (_count(dense.get(side, 0)) and dense.get(side, 0) >= 0):
            raise SpecError(f"--model {path}: dense.{side}: want a count >= 0, got "
                            f"{dense[side]!r:.60}")
    return spec


def table_ids(spec, remote_ids):
    """{table name: (lo, hi)} of the ids to draw from, for every table of a spec that
    load_spec checked."""
    out = {}
    for table in spec["tables"]:
        if "rows" in table:
            out[table["name"]] = (0, int(table["rows"]))
        elif table.get("storage") == "redis":
            if remote_ids is None:
                raise SpecError(f"table '{table['name']}' is storage: redis and has no rows in "
                                "the spec: give --remote-ids LO:HI, the ids loaded into the "
                                "cluster")
            out[table["name"]] = remote_ids
        else:
            raise SpecError(f"table '{table['name']}': no rows in the spec")
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
        spec = load_spec(args.model)
        ids = table_ids(spec, args.remote_ids)
    except SpecError as e:
        print(f"rank_client: error: {e}", file=sys.stderr)
        return 2
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
