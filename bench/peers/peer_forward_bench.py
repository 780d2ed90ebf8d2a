#!/usr/bin/env python3
"""The peers' forward alone (no gRPC, no decode), one thread: ONNX Runtime on the graph
of tools/fuserank_onnx_export.py, PyTorch 2.x eager (bench/peers/torch_dlrm.py), the
same module through torch.compile, and through TorchScript (traced per candidate count on
a tuple-of-tensors wrapper, frozen, optimize_for_inference). Run with the bench venv's python:
  build/venv-peers/bin/python bench/peers/peer_forward_bench.py \
      --model=bench/out/model/bench.yaml --onnx=bench/out/peers/bench.onnx \
      [--candidates=16,256,1024] [--systems=ort,eager,compiled,script] [--seconds=3] [--json]
Requests as fuserank-bench makes them (Zipf 1.05 ids, one id per bag), decoded and fed
once, untimed (the ONNX peer's decode of a RankRequest into its inputs is timed on its
own, as ort_decode); each call's wall time and the calling thread's CPU time are taken (with
one intra-op thread both runtimes compute on the calling thread). Before timing, every
system's scores are checked against ONNX Runtime's to 1e-5. The last stdout line is JSON
with --json.
"""

import argparse
import json
import os
import statistics
import sys
import time


def timed(fn, items, seconds, warmup=10):
    for i in range(warmup):
        fn(items[i % len(items)])
    wall, cpu, deadline, i = [], [], time.perf_counter() + seconds, 0
    while time.perf_counter() < deadline or len(wall) < 20:
        start, start_cpu = time.perf_counter(), time.thread_time()
        fn(items[i % len(items)])
        cpu.append(time.thread_time() - start_cpu)
        wall.append(time.perf_counter() - start)
        i += 1
    return {"wall_us": statistics.median(wall) * 1e6, "cpu_us": statistics.median(cpu) * 1e6,
            "iterations": len(wall)}


def flat(batch):
    """A Batch as a tuple of tensors (TorchScript takes no Python objects)."""
    none = None
    user = tuple(t for ids, w in batch.user_bags for t in (ids, none if w is None else w)
                 if t is not None)
    item = tuple(t for ids, off, w in batch.item_bags for t in (ids, off, w) if t is not None)
    return user + item + (batch.user_dense, batch.item_dense)


def traced(torch, torch_dlrm, model, batch):
    """torch.jit.trace of the model on `batch`'s layout (which bags carry weights, the
    candidate count), frozen for inference."""
    user_w = [w is not None for _, w in batch.user_bags]
    item_w = [w is not None for _, _, w in batch.item_bags]

    class Flat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            args, k = list(args), 0
            user = []
            for weighted in user_w:
                user.append((args[k], args[k + 1] if weighted else None))
                k += 2 if weighted else 1
            item = []
            for weighted in item_w:
                item.append((args[k], args[k + 1], args[k + 2] if weighted else None))
                k += 3 if weighted else 2
            return self.model(torch_dlrm.Batch(batch.n, user, args[k], item, args[k + 1]))

    with torch.inference_mode():
        module = torch.jit.trace(Flat().eval(), flat(batch), check_trace=False)
    return torch.jit.optimize_for_inference(torch.jit.freeze(module.eval()))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--onnx", required=True)
    p.add_argument("--candidates", default="16,256,1024")
    p.add_argument("--systems", default="ort,eager,compiled,script")
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per system and size")
    p.add_argument("--pool", type=int, default=16, help="distinct requests per size")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy as np
    import onnxruntime
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ort_dlrm
    import proto_stubs
    import torch_dlrm
    import workload

    torch.set_num_threads(1)
    pb2, _ = proto_stubs.load()
    systems = args.systems.split(",")
    ort = ort_dlrm.OrtDlrm(args.model, args.onnx, threads=1)
    eager = (torch_dlrm.TorchDlrm(args.model) if {"eager", "compiled", "script"} & set(systems)
             else None)
    compiled = None
    if "compiled" in systems:
        compiled = torch.compile(eager)
    scripted = {}  # candidates -> TorchScript module, traced on that size's first batch
    rng = np.random.default_rng(args.seed)
    samplers = workload.samplers_for(ort.spec, 1.05, rng)
    results, notes = [], {}
    for n in [int(c) for c in args.candidates.split(",")]:
        requests = [workload.make_request(pb2, ort.spec, samplers, rng, n) for _ in range(args.pool)]
        batches = [torch_dlrm.decode_request(ort, r) for r in requests]
        feeds = [ort.feeds(b) for b in batches]
        want = ort.run(feeds[0])
        row = {"candidates": n}
        for system in systems:
            if system == "ort":
                fn, items = ort.run, feeds
            elif system == "script":
                try:
                    scripted[n] = traced(torch, torch_dlrm, eager, batches[0])
                except Exception as e:
                    notes[system] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                    continue

                def fn(args, module=scripted[n]):
                    with torch.inference_mode():
                        return module(*args)
                items = [flat(b) for b in batches]
            else:
                module = eager if system == "eager" else compiled

                def fn(b, module=module):
                    with torch.inference_mode():
                        return module(b)
                items = batches
            started = time.perf_counter()
            try:
                got = np.asarray(fn(items[0]))
            except Exception as e:  # torch.compile needs a working C++ toolchain
                notes[system] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                print(f"{system}: failed: {notes[system]}", file=sys.stderr, flush=True)
                continue
            first_s = time.perf_counter() - started
            worst = float(np.max(np.abs(got - want)))
            if worst > 1e-5:
                raise SystemExit(f"{system} and ort differ by {worst} at {n} candidates")
            r = timed(fn, items, args.seconds)
            r.update(first_call_s=first_s, max_abs_diff_vs_ort=worst)
            row[system] = r
            print(f"{system:9} {n:5} candidates: wall {r['wall_us']:9.1f} us, cpu "
                  f"{r['cpu_us']:9.1f} us ({r['iterations']} calls; first call {first_s:.2f} s)",
                  flush=True)
        if "ort" in systems:  # what the ONNX peer's service pays before it runs the graph
            r = timed(lambda q: ort.feeds(torch_dlrm.decode_request(ort, q)), requests,
                      args.seconds / 2, warmup=2)
            row["ort_decode"] = r
            print(f"decode+feed {n:5} candidates: wall {r['wall_us']:9.1f} us, cpu "
                  f"{r['cpu_us']:9.1f} us (Python: RankRequest -> padded arrays)", flush=True)
        results.append(row)
    if args.json:
        print(json.dumps({"torch": torch.__version__, "onnxruntime": onnxruntime.__version__,
                          "threads": 1, "model": ort.spec.name, "notes": notes,
                          "results": results}))


if __name__ == "__main__":
    main()
