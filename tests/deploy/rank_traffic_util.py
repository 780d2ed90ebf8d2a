"""fuserank's side of the Prometheus integration test: Python stubs of the Ranker and Admin
protos generated with protoc, and Rank traffic for the demo model from a thread."""

import os
import random
import subprocess
import sys
import threading

import grpc

import deploy_util as du

INVALID_EVERY = 10        # one Rank request in 10 names an unknown table: INVALID_ARGUMENT
GRPC_OPTIONS = [("grpc.enable_http_proxy", 0)]


def generate_stubs(tmp):
    out = os.path.join(tmp, "stubs")
    os.makedirs(out)
    proto_dir = os.path.join(du.SOURCE_DIR, "proto")
    subprocess.run(["protoc", f"--proto_path={proto_dir}", f"--python_out={out}",
                    f"--grpc_out={out}", "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    "fuserank/v1/ranker.proto", "fuserank/v1/admin.proto"],
                   check=True, timeout=60)
    sys.path.insert(0, out)  # a `fuserank` namespace package: no clash with `grpc`
    from fuserank.v1 import admin_pb2, admin_pb2_grpc, ranker_pb2, ranker_pb2_grpc
    return ranker_pb2, ranker_pb2_grpc, admin_pb2, admin_pb2_grpc


class Traffic(threading.Thread):
    """Sends Rank requests for the demo model until stopped; every INVALID_EVERY-th names a
    table the model does not have."""

    def __init__(self, address, spec, pb, pb_grpc, seed):
        super().__init__(daemon=True)
        self.channel = grpc.insecure_channel(address, options=GRPC_OPTIONS)
        self.stub = pb_grpc.RankerStub(self.channel)
        self.pb, self.spec, self.rng = pb, spec, random.Random(seed)
        self.user_tables = [t for t in spec["tables"] if t["side"] == "user"]
        self.item_tables = [t for t in spec["tables"] if t["side"] == "item"]
        self.stop_event = threading.Event()
        self.codes = {}
        self.problems = []

    def ids(self, table, n):
        # Half the ids among the first rows (a hot set has something to hit), half anywhere.
        rows = table["rows"]
        return [self.rng.randrange(min(rows, 4096)) if self.rng.random() < 0.5
                else self.rng.randrange(rows) for _ in range(n)]

    def request(self, i):
        pb = self.pb
        req = pb.RankRequest(request_id=f"it-{i}", top_k=10)
        for t in self.user_tables:
            req.user_features.append(pb.Feature(name=t["name"], ids=self.ids(t, 2)))
        req.user_dense.extend(self.rng.random() for _ in range(self.spec["dense"]["user"]))
        for c in range(self.rng.randrange(8, 65)):
            cand = req.candidates.add(item_id=1000 + c)
            for t in self.item_tables:
                cand.features.append(pb.Feature(name=t["name"], ids=self.ids(t, 1)))
            cand.dense.extend(self.rng.random() for _ in range(self.spec["dense"]["item"]))
        if i % INVALID_EVERY == INVALID_EVERY - 1:
            req.user_features.append(pb.Feature(name="no_such_table", ids=[1]))
        return req

    def run(self):
        i = 0
        while not self.stop_event.is_set() and i < 200000:
            req = self.request(i)
            try:
                reply = self.stub.Rank(req, timeout=10)
                code = "OK"
                scores = [item.score for item in reply.items]
                if (len(scores) != min(10, len(req.candidates))
                        or scores != sorted(scores, reverse=True)
                        or not all(0.0 <= s <= 1.0 for s in scores)):
                    self.problems.append(f"request {i}: bad reply {reply}")
            except grpc.RpcError as e:
                code = e.code().name
            self.codes[code] = self.codes.get(code, 0) + 1
            i += 1
            self.stop_event.wait(0.004)  # ~150-250 requests/s: busy, not saturated

    def stop(self):
        self.stop_event.set()
        self.join(15)
        self.channel.close()
