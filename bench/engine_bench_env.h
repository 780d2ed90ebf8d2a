// The in-memory bench model and the helpers the CPU engine microbenchmarks share
// (engine_bench.cc, engine_precision_bench.cc): 26 tables of dim 32 (8 user: 4 x 200k +
// 4 x 1000 rows; 18 item: 9 x 200k + 9 x 1000 rows, fp32), 13 dense (5 user + 8 item),
// bottom 64-32, dot, top 256-128-1, random weights, no files. Batches hold one request
// each, ids Zipf(1.05) ranks scattered over the rows, one id per bag (the load
// generator's defaults), kBatchesPerSize distinct batches per size so that rows vary.
// Built once per process, on first use; not thread-safe (benchmarks run one at a time).
#ifndef FUSERANK_BENCH_ENGINE_BENCH_ENV_H_
#define FUSERANK_BENCH_ENGINE_BENCH_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/backend.h"
#include "engine/batch.h"
#include "engine/cpu/cpu_plan.h"
#include "engine/cpu/cpu_simd.h"
#include "engine/model.h"

namespace fuserank::engine::bench {

inline constexpr int kBatchesPerSize = 16;
inline constexpr int kSizes[] = {16, 256, 1024};  // candidates per request

struct BenchEnv {
  std::shared_ptr<const Model> model;
  CpuPlan plan;                             // fp32
  std::vector<std::vector<Batch>> batches;  // by SizeIndex: kBatchesPerSize each
};

BenchEnv& Env();
// The index into kSizes of `candidates` (0 when it is none of them).
int SizeIndex(int candidates);

// The `isa` argument of a benchmark: forces that ISA for its lifetime (0: none).
class IsaScope {
 public:
  IsaScope(benchmark::State& state, int64_t arg);
  ~IsaScope();
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;
  bool ok() const { return ok_; }
  CpuIsa isa() const { return isa_; }

 private:
  CpuIsa isa_ = CpuIsa::kGeneric;
  bool ok_ = true;
  bool forced_ = false;
};

// The FMA peak of `isa` on this core, GFLOP/s: best of 25 runs of the BM_PeakFma loop
// (a few ms each; many, so that one undisturbed run is among them on a shared machine),
// measured once per process. A share above 1 means every run was disturbed.
double PeakGflops(CpuIsa isa);

// Multiply-add FLOPs per candidate of the MLP layers ScoreTile runs (bottom item share,
// bottom rest, top), and of the per-candidate dots.
double MlpFlops(const CpuPlan& plan);
double InteractionFlops(const CpuPlan& plan);

// GFLOP/s of `flops` and its share of `isa`'s peak, as rate counters.
void SetFlopCounters(benchmark::State& state, const std::string& prefix, double flops, CpuIsa isa);

// The timed loop of the Run() benchmarks: worker 0 runs the batches in turn; returns the
// stage seconds summed over the iterations.
StageTimes RunBatches(benchmark::State& state, Backend& backend, const std::vector<Batch>& batches);

// Sets the per-stage counters (lookup_us, cross_us, dnn_us, topk_us: per iteration).
void SetStageCounters(benchmark::State& state, const StageTimes& stages);

// The timed loop of the MLP benchmarks: the bench model's bottom (item share of layer 0,
// then 64 -> 32) and top (383 -> 256 -> 128 -> 1) layers of `plan` in tiles of
// kTileCandidates, as ScoreTile runs them, on random activations.
void TimeMlpTiles(benchmark::State& state, const CpuPlan& plan, int candidates);

}  // namespace fuserank::engine::bench

#endif  // FUSERANK_BENCH_ENGINE_BENCH_ENV_H_
