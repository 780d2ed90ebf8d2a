#!/usr/bin/env python3
"""fbgemm's CPU embedding lookup on the bench tables, the lookup stage alone: the pooled
rows of a request's item tables for N candidates (one id per bag, Zipf 1.05), the same
work as fuserank-microbench's BM_EngineLookup. Run with the bench venv's python:
  build/venv-peers/bin/python bench/peers/fbgemm_lookup_bench.py \
      --model=bench/out/model/bench.yaml [--candidates=16,256,1024] [--seconds=2] [--json]
Two fbgemm_gpu modules over the model's item tables (fp32 rows copied from its
safetensors): the inference table-batched embedding (IntNBitTableBatchedEmbeddingBagsCodegen,
SparseType.FP32 rows, fp32 output) and the training one (SplitTableBatchedEmbeddingBagsCodegen,
ComputeDevice.CPU, EXACT_SGD: the default optimizer has no CPU kernel in fbgemm-gpu-cpu)
under no_grad, forward only; and PyTorch's own nn.EmbeddingBag, one call per table,
for scale. One thread. Each output is checked against a NumPy gather-sum to 1e-5.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_forward_bench import timed  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--candidates", default="16,256,1024")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--pool", type=int, default=16)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy as np
    import torch

    import safetensors_np
    import torch_dlrm
    import workload

    torch.set_num_threads(1)
    spec = torch_dlrm.ModelSpec(args.model)
    tensors = safetensors_np.load(spec.weights_path)
    item = [t for t in spec.tables if t.side == "item"]
    if spec.embedding_dtype != "fp32":
        raise SystemExit("fbgemm_lookup_bench.py: the bench model's tables are fp32")
    weights = [np.asarray(tensors[f"embeddings.{t.name}.weight"][1]) for t in item]
    modules, notes = {}, {}
    try:
        import fbgemm_gpu  # noqa: F401
        from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
        from fbgemm_gpu.split_table_batched_embeddings_ops_inference import (
            IntNBitTableBatchedEmbeddingBagsCodegen)
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice, SplitTableBatchedEmbeddingBagsCodegen)
    except Exception as e:
        notes["fbgemm"] = f"import fbgemm_gpu failed: {type(e).__name__}: {e}"
    if "fbgemm" not in notes:
        try:
            tbe = IntNBitTableBatchedEmbeddingBagsCodegen(
                [(t.name, t.rows, t.dim, SparseType.FP32, EmbeddingLocation.HOST) for t in item],
                device="cpu", pooling_mode=PoolingMode.SUM, output_dtype=SparseType.FP32)
            tbe.initialize_weights()
            for (dst, _), w in zip(tbe.split_embedding_weights(), weights):
                dst.copy_(torch.from_numpy(w.view(np.uint8).reshape(dst.shape)))
            modules["fbgemm_inference_tbe"] = ("tbe32", tbe)
        except Exception as e:
            notes["fbgemm_inference_tbe"] = f"{type(e).__name__}: {str(e)[:300]}"
        try:
            tbe = SplitTableBatchedEmbeddingBagsCodegen(
                [(t.rows, t.dim, EmbeddingLocation.HOST, ComputeDevice.CPU) for t in item],
                optimizer=EmbOptimType.EXACT_SGD, pooling_mode=PoolingMode.SUM)
            with torch.no_grad():
                for dst, w in zip(tbe.split_embedding_weights(), weights):
                    dst.copy_(torch.from_numpy(w))
            modules["fbgemm_training_tbe"] = ("tbe64", tbe)
        except Exception as e:
            notes["fbgemm_training_tbe"] = f"{type(e).__name__}: {str(e)[:300]}"
    bags = [torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(w), mode="sum") for w in weights]
    modules["torch_embedding_bag"] = ("bags", bags)

    rng = np.random.default_rng(args.seed)
    samplers = [workload.ZipfIds(t.rows, 1.05, rng) for t in item]
    results = []
    for n in [int(c) for c in args.candidates.split(",")]:
        ids = [np.stack([s.sample(rng, n) for s in samplers]) for _ in range(args.pool)]  # [T, n]
        want = np.concatenate([weights[t][ids[0][t]] for t in range(len(item))], axis=1)
        inputs = {
            "tbe32": [(torch.from_numpy(i.reshape(-1).astype(np.int32)),
                       torch.arange(i.size + 1, dtype=torch.int32)) for i in ids],
            "tbe64": [(torch.from_numpy(i.reshape(-1).astype(np.int64)),
                       torch.arange(i.size + 1, dtype=torch.int64)) for i in ids],
            "bags": [[(torch.from_numpy(row.astype(np.int64)), torch.arange(n)) for row in i] for i in ids],
        }
        row = {"candidates": n}
        for name, (kind, module) in modules.items():
            if kind == "bags":
                def fn(x, bags=module):
                    return torch.cat([b(i, o) for b, (i, o) in zip(bags, x)], dim=1)
            else:
                def fn(x, tbe=module):
                    return tbe(x[0], x[1])
            # no_grad, not inference_mode: under inference_mode the training module
            # dispatches to its pt2 lookup, which fbgemm-gpu-cpu builds without a CPU kernel.
            with torch.no_grad():
                try:
                    got = fn(inputs[kind][0]).detach().float().numpy()
                except Exception as e:
                    notes[name] = f"{type(e).__name__}: {str(e)[:300]}"
                    continue
                worst = float(np.max(np.abs(got - want)))
                if got.shape != want.shape or worst > 1e-5:
                    raise SystemExit(f"{name}: output {got.shape} differs from the gather by {worst}")
                r = timed(fn, inputs[kind], args.seconds)
            row[name] = r
            print(f"{name:22} {n:5} candidates: wall {r['wall_us']:8.1f} us, cpu {r['cpu_us']:8.1f} us",
                  flush=True)
        results.append(row)
    if args.json:
        version = getattr(sys.modules.get("fbgemm_gpu"), "__version__", None)
        print(json.dumps({"torch": torch.__version__, "fbgemm_gpu": version, "tables": len(item),
                          "notes": notes, "results": results}))


if __name__ == "__main__":
    main()
