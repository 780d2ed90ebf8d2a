#!/usr/bin/env python3
"""PyTorch peer of the fuserank GPU path, on the same GPU in the same run.

The bench model of bench/models/gen_bench_model.sh (26 tables of dim 32: 8 user, 18
item, 200k or 1000 rows; 13 dense; bottom 64-32; dot; top 256-128-1), random weights,
built the way a PyTorch user would: nn.EmbeddingBag per table, nn.Linear MLPs, a batched
dot interaction, sigmoid and torch.topk. For 1 request of 16, 256 and 1024 candidates it
times one batch as fuserank's device time is timed: from the copy of the inputs to the
device to the copy of the top-K back, with CUDA events, eager and CUDA-graphed
(torch.cuda.CUDAGraph with static inputs). Like fuserank-gpu-bench (gpu_bench.cc,
kBatchPool), each size cycles a pool of POOL distinct batches (uniform ids, as there). The
pool's rows fit in the L2 (about 64 MB at 1024 candidates, less below), so cycling alone
times a warm L2; as fuserank-gpu-bench does, each size is timed with the L2 flushed before
every run (4x its size written, then a sync: cold) and then without (warm), "l2_flushed" in
the JSON. fp32, TF32 off. One JSON line per figure.
usage: torch_peer_gpu.py [--reps N]
"""

import argparse
import json
import statistics
import time

import torch

DIM = 32
USER_ROWS = [200000] * 4 + [1000] * 4
ITEM_ROWS = [200000] * 9 + [1000] * 9
DENSE_USER, DENSE_ITEM = 5, 8
TOP_K = 100
POOL = 64  # distinct batches cycled per size: gpu_bench.cc's kBatchPool


class BenchDlrm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.user = torch.nn.ModuleList(
            torch.nn.EmbeddingBag(r, DIM, mode="sum") for r in USER_ROWS)
        self.item = torch.nn.ModuleList(
            torch.nn.EmbeddingBag(r, DIM, mode="sum") for r in ITEM_ROWS)
        self.bottom = torch.nn.Sequential(
            torch.nn.Linear(DENSE_USER + DENSE_ITEM, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, DIM), torch.nn.ReLU())
        n = 1 + len(USER_ROWS) + len(ITEM_ROWS)
        self.pairs = n * (n - 1) // 2
        self.top = torch.nn.Sequential(
            torch.nn.Linear(DIM + self.pairs, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
        li, lj = torch.tril_indices(n, n, offset=-1)
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)

    def forward(self, user_ids, item_ids, item_offsets, user_dense, item_dense, k: int):
        # user_ids [U] (one id per user table); item_ids [I, N]; item_offsets [N];
        # user_dense [DENSE_USER]; item_dense [N, DENSE_ITEM].
        n = item_dense.shape[0]
        zero = item_offsets[:1]
        users = [emb(user_ids[t:t + 1], zero) for t, emb in enumerate(self.user)]  # [1, D]
        items = [emb(item_ids[t], item_offsets) for t, emb in enumerate(self.item)]  # [N, D]
        x = torch.cat([user_dense.expand(n, DENSE_USER), item_dense], dim=1)
        z = self.bottom(x)
        v = torch.stack([z] + [u.expand(n, DIM) for u in users] + items, dim=1)  # [N, 27, D]
        dots = torch.bmm(v, v.transpose(1, 2))[:, self.li, self.lj]
        logits = self.top(torch.cat([z, dots], dim=1)).squeeze(1)
        return torch.topk(torch.sigmoid(logits), k)


def make_inputs(n, gen):
    user_ids = torch.tensor([int(torch.randint(r, (1,), generator=gen)) for r in USER_ROWS])
    item_ids = torch.stack([torch.randint(r, (n,), generator=gen) for r in ITEM_ROWS])
    return [t.pin_memory() for t in (
        user_ids, item_ids, torch.arange(n), torch.rand(DENSE_USER, generator=gen),
        torch.rand(n, DENSE_ITEM, generator=gen))]


def l2_flusher():
    """flush(): writes 4x the L2 and waits, so the next run finds none of the last one's data
    in L2 (fuserank-gpu-bench's DeviceTimer::FlushL2)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = getattr(props, "L2_cache_size", 0) or 64 << 20  # not reported: 64 MiB, over an H200's
    buf = torch.empty(4 * l2, dtype=torch.uint8, device="cuda")
    count = [0]

    def flush():
        count[0] += 1
        buf.fill_(count[0] & 0xFF)
        torch.cuda.synchronize()
    return flush


def time_eager(model, pool, k, reps, flush):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out_scores = torch.empty(k).pin_memory()
    out_index = torch.empty(k, dtype=torch.int64).pin_memory()
    device_ms, wall_us = [], []
    for i in range(reps + 10):
        if flush:
            flush()  # done before the clock and the start event: in neither time
        t0 = time.perf_counter()
        start.record()
        dev = [t.to("cuda", non_blocking=True) for t in pool[i % len(pool)]]
        scores, index = model(*dev, k)
        out_scores.copy_(scores, non_blocking=True)
        out_index.copy_(index, non_blocking=True)
        stop.record()
        stop.synchronize()
        if i >= 10:
            device_ms.append(start.elapsed_time(stop))
            wall_us.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(device_ms) * 1e3, statistics.median(wall_us)


def time_graph(model, pool, k, reps, flush):
    static = [t.to("cuda") for t in pool[0]]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            model(*static, k)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        scores, index = model(*static, k)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out_scores = torch.empty(k).pin_memory()
    out_index = torch.empty(k, dtype=torch.int64).pin_memory()
    device_ms, wall_us = [], []
    for i in range(reps + 10):
        if flush:
            flush()
        t0 = time.perf_counter()
        start.record()
        for dst, src in zip(static, pool[i % len(pool)]):
            dst.copy_(src, non_blocking=True)
        graph.replay()
        out_scores.copy_(scores, non_blocking=True)
        out_index.copy_(index, non_blocking=True)
        stop.record()
        stop.synchronize()
        if i >= 10:
            device_ms.append(start.elapsed_time(stop))
            wall_us.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(device_ms) * 1e3, statistics.median(wall_us)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=300)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(3)
    gen = torch.Generator().manual_seed(7)
    model = BenchDlrm().cuda().eval()
    print(json.dumps({"bench": "torch_device", "name": torch.cuda.get_device_name(),
                      "torch": torch.__version__}), flush=True)
    with torch.inference_mode():
        flusher = l2_flusher()
        for n in (16, 256, 1024):
            pool = [make_inputs(n, gen) for _ in range(POOL)]
            k = min(n, TOP_K)
            for flushed in (1, 0):
                for mode, fn in (("eager", time_eager), ("graph", time_graph)):
                    head = {"bench": "torch", "mode": mode, "candidates": n, "l2_flushed": flushed}
                    try:
                        device_us, wall_us = fn(model, pool, k, args.reps,
                                                flusher if flushed else None)
                    except RuntimeError as err:  # e.g. an op that cannot be captured
                        print(json.dumps({**head, "error": str(err)[:300]}), flush=True)
                        continue
                    l2 = "flushed" if flushed else "warm"
                    print(f"torch {mode:5s} batch of {n:4d} (L2 {l2:7s}): device "
                          f"{device_us:8.1f} us  wall {wall_us:8.1f} us", flush=True)
                    print(json.dumps({**head, "device_us": device_us, "wall_us": wall_us}),
                          flush=True)


if __name__ == "__main__":
    main()
