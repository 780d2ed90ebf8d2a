#!/usr/bin/python3
"""Calls fuserank's Admin service: hot-row sets (get, set, rebuild) and model reloads.

Usage (Debian's python3 with python3-grpcio and python3-grpc-tools):
  tools/admin_client.py [--target 127.0.0.1:8701] [--token-file F] [--model NAME] COMMAND
    get [TABLE ...]                 hot-row status of the tables (all when none)
    set TABLE=ID,ID,... [...]       replace the hot sets of the listed tables, atomically;
                                    TABLE=@FILE reads ids (comma or space separated) from
                                    FILE; TABLE= empties the table's set
    rebuild [TABLE ...]             rebuild from observed traffic (cache.policy: frequency)
    reload [--path SPEC]            load a new model version and swap it in

Prints the reply as JSON and exits 0; on an error prints "admin_client: CODE: message"
to stderr and exits 1. The token (server.admin_token_file) comes from --token-file or the
FUSERANK_ADMIN_TOKEN environment variable and is sent as `authorization: Bearer <token>`.
With TLS on the server, pass --ca (and --cert/--key for mTLS).
"""
import argparse
import json
import os
import sys
import tempfile

import grpc
from grpc_tools import protoc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_stubs():
    out = tempfile.mkdtemp(prefix="fuserank_admin_stubs_")
    proto_dir = os.path.join(ROOT, "proto")
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    args = ["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out}",
            f"--grpc_python_out={out}", "fuserank/v1/admin.proto"]
    if protoc.main(args) != 0:
        sys.exit("admin_client: protoc failed on proto/fuserank/v1/admin.proto")
    sys.path.insert(0, out)
    from fuserank.v1 import admin_pb2, admin_pb2_grpc  # noqa: E402
    return admin_pb2, admin_pb2_grpc


def parse_ids(text):
    """Ids from "1,2,3", "@file" (comma or whitespace separated) or "" (none)."""
    if text.startswith("@"):
        with open(text[1:]) as f:
            text = f.read()
    return [int(tok) for tok in text.replace(",", " ").split()]


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


def channel_for(args):
    if not args.ca:
        return grpc.insecure_channel(args.target)
    def read(path):
        with open(path, "rb") as f:
            return f.read()
    creds = grpc.ssl_channel_credentials(
        root_certificates=read(args.ca),
        private_key=read(args.key) if args.key else None,
        certificate_chain=read(args.cert) if args.cert else None)
    return grpc.secure_channel(args.target, creds)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:8701", help="server.admin_listen")
    parser.add_argument("--token-file", help="file holding the admin bearer token")
    parser.add_argument("--model", default="", help="served model name (empty: the default)")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--ca", help="PEM CA of the server certificate (TLS)")
    parser.add_argument("--cert", help="PEM client certificate (mTLS)")
    parser.add_argument("--key", help="PEM client key (mTLS)")
    sub = parser.add_subparsers(dest="command", required=True)
    get = sub.add_parser("get", help="hot-row status")
    get.add_argument("tables", nargs="*")
    put = sub.add_parser("set", help="replace hot sets")
    put.add_argument("tables", nargs="+", type=table_ids, metavar="TABLE=IDS")
    rebuild = sub.add_parser("rebuild", help="rebuild from access frequencies")
    rebuild.add_argument("tables", nargs="*")
    reload = sub.add_parser("reload", help="reload the model")
    reload.add_argument("--path", default="", help="new spec YAML (empty: the current one)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    token = os.environ.get("FUSERANK_ADMIN_TOKEN", "")
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    metadata = [("authorization", f"Bearer {token}")] if token else []
    pb, pb_grpc = load_stubs()
    with channel_for(args) as channel:
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
