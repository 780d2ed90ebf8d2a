#!/usr/bin/python3
"""Calls fuserank's Admin service: hot-row sets (get, set, rebuild) and model reloads.

Usage (Debian's python3 with python3-grpcio and python3-grpc-tools):
  tools/admin_client.py [--target 127.0.0.1:8701] [--token-file F] [--model NAME]
      [--tls] [--ca PEM] [--cert PEM --key PEM] COMMAND
    get [TABLE ...]                 hot-row status of the tables (all when none)
    set TABLE=ID,ID,... [...]       replace the hot sets of the listed tables, atomically;
                                    TABLE=@FILE reads ids (comma or space separated) from
                                    FILE; TABLE= empties the table's set
    rebuild [TABLE ...]             rebuild from observed traffic (cache.policy: frequency)
    reload [--path SPEC]            load a new model version and swap it in

Prints the reply as JSON and exits 0; on an error prints "admin_client: CODE: message"
to stderr and exits 1. The token (server.admin_token_file) comes from --token-file or the
FUSERANK_ADMIN_TOKEN environment variable and is sent as `authorization: Bearer <token>`.
With TLS on the server, pass --ca (the server certificate's CA) or --tls (the system's CA
roots), and --cert/--key for mTLS; without any of them the channel is plaintext.
"""
import argparse
import json
import os
import sys

import grpc

from fuserank_client_common import add_tls_arguments, load_stubs, open_channel

INT64 = (-2**63, 2**63 - 1)


def parse_ids(text):
    """Ids from "1,2,3", "@file" (comma or whitespace separated) or "" (none)."""
    if text.startswith("@"):
        with open(text[1:]) as f:
            text = f.read()
    ids = [int(tok) for tok in text.replace(",", " ").split()]
    bad = next((i for i in ids if not INT64[0] <= i <= INT64[1]), None)
    if bad is not None:
        raise ValueError(f"id {bad} is outside int64")
    return ids


def table_ids(spec):
    table, sep, ids = spec.partition("=")
    if not sep or not table:
        raise argparse.ArgumentTypeError(f"'{spec}': want TABLE=ID,ID,... or TABLE=@FILE")
    try:
        return table, parse_ids(ids)
    except (OSError, ValueError) as e:
        raise argparse.ArgumentTypeError(f"'{spec}': {e}")


def status_json(status):
    return {"version": status.version,
            "tables": [{"table": t.table, "hot_rows": t.hot_rows, "capacity": t.capacity,
                        "hits": t.hits, "misses": t.misses} for t in status.tables]}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:8701", help="server.admin_listen")
    parser.add_argument("--token-file", help="file holding the admin bearer token")
    parser.add_argument("--model", default="", help="served model name (empty: the default)")
    parser.add_argument("--timeout", type=float, default=60.0)
    add_tls_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    get = sub.add_parser("get", help="hot-row status")
    get.add_argument("tables", nargs="*")
    put = sub.add_parser("set", help="replace hot sets")
    put.add_argument("tables", nargs="+", type=table_ids, metavar="TABLE=IDS")
    rebuild = sub.add_parser("rebuild", help="rebuild from access frequencies")
    rebuild.add_argument("tables", nargs="*")
    reload = sub.add_parser("reload", help="reload the model")
    reload.add_argument("--path", default="", help="new spec YAML (empty: the current one)")
    return parser, parser.parse_args(argv)


def main(argv=None):
    parser, args = parse_args(argv)
    token = os.environ.get("FUSERANK_ADMIN_TOKEN", "")
    if args.token_file:
        try:
            with open(args.token_file) as f:
                token = f.read().strip()
        except OSError as e:
            parser.error(f"--token-file {args.token_file}: {e.strerror}")
    metadata = [("authorization", f"Bearer {token}")] if token else []
    channel = open_channel(parser, args)
    pb, pb_grpc = load_stubs("admin_client", "admin")
    with channel:
        stub = pb_grpc.AdminStub(channel)
        call = {"metadata": metadata, "timeout": args.timeout}
        try:
            if args.command == "get":
                reply = status_json(stub.GetHotRows(
                    pb.GetHotRowsRequest(tables=args.tables, model=args.model), **call))
            elif args.command == "set":
                request = pb.SetHotRowsRequest(model=args.model, tables=[
                    pb.TableHotRows(table=t, ids=ids) for t, ids in args.tables])
                reply = status_json(stub.SetHotRows(request, **call))
            elif args.command == "rebuild":
                reply = status_json(stub.RebuildHotRows(
                    pb.RebuildHotRowsRequest(tables=args.tables, model=args.model), **call))
            else:
                resp = stub.ReloadModel(
                    pb.ReloadModelRequest(model=args.model, path=args.path), **call)
                reply = {"model": resp.model, "model_version": resp.model_version,
                         "message": resp.message}
        except grpc.RpcError as e:
            print(f"admin_client: {e.code().name}: {e.details()}", file=sys.stderr)
            return 1
    print(json.dumps(reply, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
