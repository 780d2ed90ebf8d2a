#!/usr/bin/env python3
"""The checks of tritonclient_e2e_test.py, run inside its venv (tritonclient, numpy,
grpcio, protobuf from PyPI). Starts fuserank-server, talks to it with tritonclient.grpc,
prints one line per check and 'N passed, N failed' last; exit 0 only when all passed."""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

import grpc
import numpy as np
import tritonclient.grpc as triton
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tritonclient.grpc import model_config_pb2, service_pb2
from tritonclient.utils import InferenceServerException

MODEL = "tc_model"  # the models: name; the spec's own name is "tcspec"
USER_TABLES = ["user_0", "user_1"]
ITEM_TABLES = ["item_0", "item_1", "item_2"]
DENSE_USER, DENSE_ITEM = 3, 2
RESULTS = []


def check(name):
    def wrap(fn):
        def run(*args):
            try:
                fn(*args)
                RESULTS.append((name, None))
                print(f"ok      {name}", flush=True)
            except Exception:  # a failed check is reported, the others still run
                RESULTS.append((name, traceback.format_exc()))
                print(f"FAILED  {name}\n{traceback.format_exc()}", flush=True)
        return run
    return wrap


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(bin_dir, tmp):
    subprocess.run([os.path.join(bin_dir, "fuserank-gen-model"), f"--out={tmp}/tcspec.yaml",
                    "--seed=5", "--version=3", "--user_tables=2", "--item_tables=3",
                    "--rows=1000,50,1000,200,30", "--dim=8", f"--dense_user={DENSE_USER}",
                    f"--dense_item={DENSE_ITEM}", "--bottom_mlp=16,8", "--interaction=dot",
                    "--top_mlp=16,1"], check=True, capture_output=True)
    port = free_port()
    with open(f"{tmp}/server.yaml", "w") as f:
        f.write(f'server: {{listen: "127.0.0.1:{port}", admin_listen: "", metrics_listen: "",\n'
                f'         max_candidates: 64}}\n'
                f'engine: {{device: cpu, streams: 2}}\n'
                f'models:\n  - {{name: {MODEL}, path: "{tmp}/tcspec.yaml"}}\n'
                f'logging: {{level: warn}}\n')
    log = open(f"{tmp}/server.log", "w")
    server = subprocess.Popen([os.path.join(bin_dir, "fuserank-server"), "--config",
                               f"{tmp}/server.yaml"], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        if server.poll() is not None:
            raise RuntimeError(f"fuserank-server exited: {open(f'{tmp}/server.log').read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, port
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("fuserank-server did not listen within 60 s")


def descriptor_files(source, tmp, protos, out):
    subprocess.run(["protoc", f"--proto_path={source}/proto", "--include_imports",
                    f"--descriptor_set_out={tmp}/{out}"] + protos, check=True,
                   capture_output=True)
    files = descriptor_pb2.FileDescriptorSet()
    with open(f"{tmp}/{out}", "rb") as f:
        files.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return files, pool


def request_tensors(rng, n):
    """A request of n candidates as numpy tensors, and the same as RankRequest fields."""
    tensors, user_bags, item_bags = {}, {}, {}
    for t, rows in zip(USER_TABLES, [1000, 50]):
        bag = rng.integers(0, rows, size=int(rng.integers(1, 4))).astype(np.int64)
        user_bags[t] = bag
        tensors[t] = bag
        tensors[f"{t}__lengths"] = np.array([len(bag)], dtype=np.int32)
    for t, rows in zip(ITEM_TABLES, [1000, 200, 30]):
        # Negative and too large ids too: every table maps them modulo its rows.
        bags = [rng.integers(-5, rows + 5, size=int(rng.integers(0, 3))).astype(np.int64)
                for _ in range(n)]
        item_bags[t] = bags
        tensors[t] = np.concatenate(bags) if n else np.zeros(0, np.int64)
        tensors[f"{t}__lengths"] = np.array([len(b) for b in bags], dtype=np.int32)
    tensors["user_dense"] = rng.standard_normal((1, DENSE_USER)).astype(np.float32)
    tensors["item_dense"] = rng.standard_normal((n, DENSE_ITEM)).astype(np.float32)
    tensors["item_ids"] = np.arange(5000, 5000 + n, dtype=np.int64)
    return tensors, user_bags, item_bags


def infer_inputs(tensors):
    dtypes = {np.dtype(np.int64): "INT64", np.dtype(np.int32): "INT32",
              np.dtype(np.float32): "FP32"}
    inputs = []
    for name, value in tensors.items():
        tensor = triton.InferInput(name, list(value.shape), dtypes[value.dtype])
        tensor.set_data_from_numpy(value)
        inputs.append(tensor)
    return inputs


def rank_request(ranker_pool, tensors, user_bags, item_bags, top_k):
    RankRequest = message_factory.GetMessageClass(
        ranker_pool.FindMessageTypeByName("fuserank.v1.RankRequest"))
    request = RankRequest(model=MODEL, top_k=top_k)
    for t, bag in user_bags.items():
        request.user_features.add(name=t, ids=bag.tolist())
    request.user_dense.extend(tensors["user_dense"][0].tolist())
    for c, item_id in enumerate(tensors["item_ids"].tolist()):
        candidate = request.candidates.add(item_id=item_id)
        for t in ITEM_TABLES:
            candidate.features.add(name=t, ids=item_bags[t][c].tolist())
        candidate.dense.extend(tensors["item_dense"][c].tolist())
    return request


class Checks:
    def __init__(self, port, source, tmp):
        self.port = port
        self.client = triton.InferenceServerClient(url=f"127.0.0.1:{port}")
        self.source, self.tmp = source, tmp

    @check("server live and ready, model ready under its models: name")
    def health(self):
        assert self.client.is_server_live()
        assert self.client.is_server_ready()
        assert self.client.is_model_ready(MODEL)
        assert self.client.is_model_ready(MODEL, model_version="3")
        assert not self.client.is_model_ready(MODEL, model_version="4")
        assert not self.client.is_model_ready("tcspec")

    @check("server metadata, model metadata, model config, repository index")
    def metadata(self):
        server = self.client.get_server_metadata(as_json=True)
        assert server["name"] == "fuserank", server
        meta = self.client.get_model_metadata(MODEL, as_json=True)
        assert meta["name"] == MODEL and meta["versions"] == ["3"], meta
        names = [i["name"] for i in meta["inputs"]]
        expected = [n for t in USER_TABLES + ITEM_TABLES
                    for n in (t, f"{t}__lengths", f"{t}__weights")]
        assert names == expected + ["user_dense", "item_dense", "item_ids"], names
        shapes = {i["name"]: [int(d) for d in i["shape"]] for i in meta["inputs"]}
        assert shapes["user_dense"] == [1, DENSE_USER] and shapes["item_dense"] == [-1, DENSE_ITEM]
        assert [o["name"] for o in meta["outputs"]] == ["scores", "indices", "item_ids"]
        config = self.client.get_model_config(MODEL).config
        assert config.max_batch_size == 0 and config.platform == "fuserank", config
        assert len(config.input) == len(names) and config.input[0].optional
        index = self.client.get_model_repository_index(as_json=True)
        assert [(m["name"], m["version"], m["state"]) for m in index["models"]] == \
            [(MODEL, "3", "READY")], index

    @check("ranked call: best first, top_k, and Rank's scores bit for bit")
    def ranked(self):
        _, ranker_pool = descriptor_files(self.source, self.tmp, ["fuserank/v1/ranker.proto"],
                                          "ranker.pb")
        rank = grpc.insecure_channel(f"127.0.0.1:{self.port}").unary_unary(
            "/fuserank.v1.Ranker/Rank", request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=lambda b: b)
        RankResponse = message_factory.GetMessageClass(
            ranker_pool.FindMessageTypeByName("fuserank.v1.RankResponse"))
        rng = np.random.default_rng(16)
        for n, top_k in [(20, 5), (7, 0), (33, 40)]:
            tensors, user_bags, item_bags = request_tensors(rng, n)
            result = self.client.infer(MODEL, infer_inputs(tensors), parameters={"top_k": top_k},
                                       request_id=f"tc-{n}")
            assert result.get_response().id == f"tc-{n}"
            scores = result.as_numpy("scores")
            indices = result.as_numpy("indices")
            item_ids = result.as_numpy("item_ids")
            k = n if top_k == 0 else min(top_k, n)
            assert scores.dtype == np.float32 and scores.shape == (k,), scores
            assert indices.dtype == np.int32 and item_ids.dtype == np.int64
            assert np.all(np.diff(scores) <= 0), scores
            assert np.array_equal(item_ids, tensors["item_ids"][indices])
            reply = RankResponse.FromString(
                rank(rank_request(ranker_pool, tensors, user_bags, item_bags, top_k)))
            rank_scores = np.array([i.score for i in reply.items], dtype=np.float32)
            assert np.array_equal(scores.view(np.uint32), rank_scores.view(np.uint32)), \
                (scores, rank_scores)
            assert indices.tolist() == [i.index for i in reply.items]

    @check("errors: a wrong datatype names the tensor; an unknown model is NOT_FOUND")
    def errors(self):
        tensors, _, _ = request_tensors(np.random.default_rng(3), 4)
        tensors["item_1"] = tensors["item_1"].astype(np.int32)
        try:
            self.client.infer(MODEL, infer_inputs(tensors))
            raise AssertionError("a tensor of the wrong datatype was accepted")
        except InferenceServerException as e:
            assert e.status() == "StatusCode.INVALID_ARGUMENT", e.status()
            assert "item_1: datatype 'INT32', expected INT64" in e.message(), e.message()
        tensors, _, _ = request_tensors(np.random.default_rng(3), 4)
        try:
            self.client.infer("nope", infer_inputs(tensors))
            raise AssertionError("an unknown model was served")
        except InferenceServerException as e:
            assert e.status() == "StatusCode.NOT_FOUND", e.status()
            assert f"model 'nope' is not loaded; loaded models: {MODEL}" in e.message(), e.message()
        assert self.client.is_server_ready()  # and it keeps serving

    @check("wire compatibility: every message, field number and RPC is tritonclient's")
    def wire(self):
        files, _ = descriptor_files(self.source, self.tmp, ["inference/grpc_service.proto"],
                                    "inference.pb")
        theirs = service_pb2.DESCRIPTOR.pool
        problems = []
        for file in files.file:
            for message in file.message_type:
                compare_message(f"{file.package}.", message, theirs, problems)
            for enum in file.enum_type:
                want = theirs.FindEnumTypeByName(f"{file.package}.{enum.name}")
                for value in enum.value:
                    if want.values_by_name[value.name].number != value.number:
                        problems.append(f"enum {enum.name}.{value.name}")
            for service in file.service:
                want = theirs.FindServiceByName(f"{file.package}.{service.name}")
                for method in service.method:
                    got = want.methods_by_name.get(method.name)
                    if got is None or f".{got.input_type.full_name}" != method.input_type or \
                            f".{got.output_type.full_name}" != method.output_type:
                        problems.append(f"rpc {method.name}")
        assert model_config_pb2.DESCRIPTOR.package == "inference"
        assert not problems, problems


def compare_message(prefix, message, theirs, problems):
    full = prefix + message.name
    try:
        want = theirs.FindMessageTypeByName(full)
    except KeyError:
        problems.append(f"{full}: not in tritonclient's protocol")
        return
    for field in message.field:
        got = want.fields_by_name.get(field.name)
        if got is None or got.number != field.number or got.type != field.type or \
                got.is_repeated != (field.label == field.LABEL_REPEATED):
            problems.append(f"{full}.{field.name} = {field.number}")
        elif field.type_name and f".{(got.message_type or got.enum_type).full_name}" != \
                field.type_name:
            problems.append(f"{full}.{field.name}: type {field.type_name}")
    for nested in message.nested_type:
        compare_message(full + ".", nested, theirs, problems)


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tritonclient_e2e_") as tmp:
        server, port = start_server(args.bin, tmp)
        try:
            checks = Checks(port, args.source, tmp)
            for run in [checks.health, checks.metadata, checks.ranked, checks.errors,
                        checks.wire]:
                run()
        finally:
            server.send_signal(signal.SIGTERM)
            code = server.wait(timeout=60)
        if code != 0:
            RESULTS.append(("server exits 0 on SIGTERM", f"exit {code}"))
            print(open(f"{tmp}/server.log").read())
    failed = [name for name, error in RESULTS if error]
    print(f"{len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
