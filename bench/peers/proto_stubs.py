"""Generates the Python messages and gRPC stubs of proto/fuserank/v1 at run time.

protoc + Debian's grpc_python_plugin write into a private temp dir (removed at exit) that
is put on sys.path; it holds only fuserank/v1/*, so it cannot shadow the grpc package.
"""

import atexit
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGIN = "/usr/bin/grpc_python_plugin"


def load(proto_root=os.path.join(REPO, "proto")):
    """Returns (ranker_pb2, ranker_pb2_grpc)."""
    out = tempfile.mkdtemp(prefix="fuserank-pb-")
    atexit.register(shutil.rmtree, out, True)
    subprocess.run(
        ["protoc", f"--proto_path={proto_root}", f"--python_out={out}", f"--grpc_out={out}",
         f"--plugin=protoc-gen-grpc={PLUGIN}", "fuserank/v1/ranker.proto"],
        check=True)
    sys.path.insert(0, out)
    pb2 = importlib.import_module("fuserank.v1.ranker_pb2")
    pb2_grpc = importlib.import_module("fuserank.v1.ranker_pb2_grpc")
    return pb2, pb2_grpc
