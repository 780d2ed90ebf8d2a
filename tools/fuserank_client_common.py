"""Shared by tools/rank_client.py and tools/admin_client.py: Python stubs generated from
proto/ into a temporary folder that is removed once they are imported, and the channel
options (--tls, --ca, --cert, --key).

Needs Debian's python3-grpcio and python3-grpc-tools.
"""
import importlib
import os
import sys
import tempfile

import grpc
from grpc_tools import protoc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_stubs(prog, proto):
    """(messages module, gRPC module) of proto/fuserank/v1/<proto>.proto, e.g. "ranker"."""
    proto_dir = os.path.join(ROOT, "proto")
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix=f"fuserank_{proto}_stubs_") as out:
        args = ["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out}",
                f"--grpc_python_out={out}", f"fuserank/v1/{proto}.proto"]
        if protoc.main(args) != 0:
            sys.exit(f"{prog}: protoc failed on proto/fuserank/v1/{proto}.proto")
        sys.path.insert(0, out)
        try:
            return (importlib.import_module(f"fuserank.v1.{proto}_pb2"),
                    importlib.import_module(f"fuserank.v1.{proto}_pb2_grpc"))
        finally:
            sys.path.remove(out)


def add_tls_arguments(parser):
    parser.add_argument("--tls", action="store_true",
                        help="TLS, checking the server against the system's CA roots (implied "
                        "by --ca, --cert and --key)")
    parser.add_argument("--ca", help="PEM CA of the server certificate (implies --tls; default: "
                        "the system's roots)")
    parser.add_argument("--cert", help="PEM client certificate, for mTLS (needs --key)")
    parser.add_argument("--key", help="PEM client key, for mTLS (needs --cert)")


def open_channel(parser, args):
    """A TLS channel when any of --tls, --ca, --cert, --key is given, else plaintext.
    A bad combination or an unreadable file is a usage error (parser.error: exit 2)."""
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together (the client certificate and its key)")
    if not (args.tls or args.ca or args.cert):
        return grpc.insecure_channel(args.target)

    def read(flag, path):
        if not path:
            return None
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            parser.error(f"{flag} {path}: {e.strerror}")

    creds = grpc.ssl_channel_credentials(root_certificates=read("--ca", args.ca),
                                         private_key=read("--key", args.key),
                                         certificate_chain=read("--cert", args.cert))
    return grpc.secure_channel(args.target, creds)
