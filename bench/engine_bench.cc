// Microbenchmarks of the CPU engine on the bench model (bench/engine_bench_env.h: built
// in memory, Zipf ids, one id per bag). Each stage is timed on its own (lookup, interaction,
// MLP, top-K) and the whole Backend::Run() at 16, 256 and 1024 candidates per request;
// items processed = candidates. The MLP and Run() benchmarks take an `isa` argument
// (0: the process's choice, FUSERANK_CPU_ISA respected; 1: AVX2; 2: AVX-512; skipped where
// the CPU lacks it) and report their FLOP rate as a share of that ISA's FMA peak, which
// BM_PeakFma measures. Run: build/bin/fuserank-microbench --benchmark_filter=Engine
// (FUSERANK_CPU_ISA=generic times the baseline path without AVX2).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/engine_bench_env.h"
#include "benchmark/benchmark.h"
#include "engine/batch.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_fma_probe.h"
#include "engine/cpu/cpu_forward.h"
#include "engine/cpu/cpu_interaction.h"
#include "engine/cpu/cpu_lookup.h"
#include "engine/cpu/cpu_mlp.h"
#include "engine/cpu/cpu_plan.h"
#include "engine/cpu/cpu_simd.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "engine/model.h"
#include "engine/topk.h"

namespace fuserank::engine {
namespace {

using bench::BenchEnv;
using bench::Env;
using bench::InteractionFlops;
using bench::IsaScope;
using bench::MlpFlops;
using bench::RunBatches;
using bench::SetFlopCounters;
using bench::SetStageCounters;
using bench::SizeIndex;
using bench::TimeMlpTiles;

// The core's FMA peak, one thread: 12 independent accumulators of FMAs, per ISA
// (isa 0: the 128-bit baseline, 1: 256-bit AVX2, 2: 512-bit AVX-512).
void BM_PeakFma(benchmark::State& state) {
  const CpuIsa isa = static_cast<CpuIsa>(state.range(0));
  if (!CpuSupports(isa)) {
    state.SkipWithError(absl::StrCat("this CPU lacks ", CpuIsaName(isa)).c_str());
    return;
  }
  constexpr int64_t kIterations = 100000;
  for (auto _ : state) benchmark::DoNotOptimize(FmaLoop(isa, kIterations));
  state.counters["GFLOPs"] =
      benchmark::Counter(1e-9 * kIterations * FmaLoopFlopsPerIteration(isa) * state.iterations(),
                         benchmark::Counter::kIsRate);
  state.SetLabel(CpuIsaName(isa));
}
BENCHMARK(BM_PeakFma)->ArgName("isa")->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

void BM_EngineRun(benchmark::State& state) {
  BenchEnv& env = Env();
  const int candidates = static_cast<int>(state.range(0));
  const IsaScope isa(state, state.range(2));
  if (!isa.ok()) return;
  BackendOptions options;
  options.workers = 1;
  options.cpu_threads = static_cast<int>(state.range(1));
  std::unique_ptr<Backend> backend = CreateCpuBackend(env.model, options);
  const StageTimes stages = RunBatches(state, *backend, env.batches[SizeIndex(candidates)]);
  state.SetItemsProcessed(state.iterations() * candidates);
  SetStageCounters(state, stages);
  // The model's FLOPs (MLP and dots) over the whole Run(), per second of this thread's
  // CPU time with one thread (a shared machine's time slices do not count), of wall time
  // with more.
  SetFlopCounters(
      state, "",
      (MlpFlops(env.plan) + InteractionFlops(env.plan)) * candidates * state.iterations(),
      isa.isa());
  state.SetLabel(CpuIsaName(isa.isa()));
}
BENCHMARK(BM_EngineRun)
    ->ArgNames({"candidates", "threads", "isa"})
    ->ArgsProduct({{16, 256, 1024}, {1}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EngineRun)
    ->ArgNames({"candidates", "threads", "isa"})
    ->Args({256, 2, 0})
    ->Args({1024, 2, 0})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Backend::Run() with the hot-row tier, side by side with none, one thread:
//   mode 0: no HotRowManager (as BM_EngineRun)
//   mode 1: a manager with empty sets: every id probed and counted as a miss
//   mode 2: each table's true top 4096 Zipf rows hot (the small tables wholly hot)
//   mode 3: mode 2 + access sampling (cache.policy: frequency, 1 id in 64)
// counters: hit_rate of the batch's ids.
void BM_EngineRunHot(benchmark::State& state) {
  BenchEnv& env = Env();
  const int candidates = static_cast<int>(state.range(0));
  const int mode = static_cast<int>(state.range(1));
  constexpr int kHotRows = 4096;
  HotRowOptions hot_options;
  hot_options.capacity = kHotRows;
  hot_options.sample_period = 64;
  std::unique_ptr<HotRowManager> manager = *HotRowManager::Create(env.model, hot_options);
  if (mode >= 2) {  // the top ranks, mapped to rows as ZipfRows scatters them
    std::vector<std::vector<int64_t>> ids(env.model->tables().size());
    std::vector<TableIds> tables;
    for (size_t t = 0; t < ids.size(); ++t) {
      const int64_t n = env.model->tables()[t].rows;
      for (int64_t rank = 0; rank < std::min<int64_t>(n, kHotRows); ++rank) {
        ids[t].push_back((rank * 2654435761ll + 12345) % n);
      }
      tables.push_back({env.model->tables()[t].name, ids[t]});
    }
    if (absl::Status status = manager->Set(tables).status(); !status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      return;
    }
  }
  BackendOptions options;
  options.workers = 1;
  options.hot_rows = mode >= 1 ? manager.get() : nullptr;
  options.sample_accesses = mode == 3;
  std::unique_ptr<Backend> backend = CreateCpuBackend(env.model, options);
  RunBatches(state, *backend, env.batches[SizeIndex(candidates)]);
  state.SetItemsProcessed(state.iterations() * candidates);
  uint64_t hits = 0, lookups = 0;
  for (const TableHotRowsStatus& t : manager->Get({})->tables) {
    hits += t.hits;
    lookups += t.hits + t.misses;
  }
  state.counters["hit_rate"] = lookups == 0 ? 0.0 : static_cast<double>(hits) / lookups;
}
BENCHMARK(BM_EngineRunHot)
    ->ArgNames({"candidates", "mode"})
    ->ArgsProduct({{16, 256}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Pooled lookup of the 18 item tables for the candidates of one request.
void BM_EngineLookup(benchmark::State& state) {
  BenchEnv& env = Env();
  const int candidates = static_cast<int>(state.range(0));
  const std::vector<Batch>& batches = env.batches[SizeIndex(candidates)];
  const int num_item = static_cast<int>(env.model->item_tables().size());
  std::vector<float> out(static_cast<size_t>(candidates) * env.plan.item_width);
  size_t i = 0;
  for (auto _ : state) {
    const Batch& batch = batches[i++ % batches.size()];
    for (int t = 0; t < num_item; ++t) {
      PooledLookup(env.model->tables()[env.model->item_tables()[t]], batch.item, t, num_item,
                   candidates, out.data() + env.plan.item_offset[t], env.plan.item_width);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * candidates);
}
BENCHMARK(BM_EngineLookup)
    ->ArgName("candidates")
    ->Arg(16)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond);

// The per-candidate dots of the bench model (z and 18 items with each other and with
// the 8 user vectors: 323 dots of width 32 per candidate), as ScoreTile runs them.
void BM_EngineInteraction(benchmark::State& state) {
  BenchEnv& env = Env();
  const CpuPlan& plan = env.plan;
  const int candidates = static_cast<int>(state.range(0));
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> rows(static_cast<size_t>(candidates) * plan.row_stride);
  std::vector<float> items(static_cast<size_t>(candidates) * plan.item_stride);
  std::vector<float> user(plan.user_width);
  for (auto* v : {&items, &user}) {
    for (float& x : *v) x = dist(rng);
  }
  const int num_user = static_cast<int>(env.model->user_tables().size());
  std::vector<float> scratch(DotGramScratchFloats(num_user, plan.own_vectors, plan.dot_dim));
  for (auto _ : state) {
    DotGramRows(user.data(), num_user, items.data(), plan.own_vectors, plan.item_stride,
                plan.dot_dim, candidates, rows.data() + plan.z_width, plan.row_stride, &scratch);
    benchmark::DoNotOptimize(rows.data());
  }
  state.SetItemsProcessed(state.iterations() * candidates);
}
BENCHMARK(BM_EngineInteraction)
    ->ArgName("candidates")
    ->Arg(16)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond);

// The dot interaction alone by vector width, on the bench model's shape at 256
// candidates (8 shared vectors, the user tables; 19 per candidate, the bottom MLP's
// output and 18 item tables), on each path (isa 0: the process's choice, 1: avx2, 2:
// avx512): avx512 and, at widths off a multiple of 8 or under 32, avx2 take the matrix
// product (engine/cpu/cpu_gram_dots.h); avx2 at the other widths four dots at a time.
void BM_EngineDotWidth(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const IsaScope isa(state, state.range(1));
  if (!isa.ok()) return;
  constexpr int kShared = 8, kOwn = 19, kRows = 256;
  constexpr int kWidth = kOwn * kShared + kOwn * (kOwn - 1) / 2;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> shared(static_cast<size_t>(kShared) * d),
      own(static_cast<size_t>(kRows) * kOwn * d);
  for (auto* v : {&shared, &own}) {
    for (float& x : *v) x = dist(rng);
  }
  std::vector<float> out(static_cast<size_t>(kRows) * kWidth);
  std::vector<float> scratch(DotGramScratchFloats(kShared, kOwn, d));
  for (auto _ : state) {
    DotGramRows(shared.data(), kShared, own.data(), kOwn, kOwn * d, d, kRows, out.data(), kWidth,
                &scratch);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetLabel(CpuIsaName(isa.isa()));
}
BENCHMARK(BM_EngineDotWidth)
    ->ArgNames({"d", "isa"})
    ->ArgsProduct({{4, 8, 12, 16, 20, 24, 32, 40, 64, 100, 128}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);

// Bottom (item share of layer 0, then 64 -> 32) and top (383 -> 256 -> 128 -> 1) MLPs
// in tiles of kTileCandidates, as ScoreTile runs them.
void BM_EngineMlp(benchmark::State& state) {
  BenchEnv& env = Env();
  const CpuPlan& plan = env.plan;
  const int candidates = static_cast<int>(state.range(0));
  const IsaScope isa(state, state.range(1));
  if (!isa.ok()) return;
  TimeMlpTiles(state, plan, candidates);
  state.SetItemsProcessed(state.iterations() * candidates);
  SetFlopCounters(state, "", MlpFlops(plan) * candidates * state.iterations(), isa.isa());
  state.SetLabel(CpuIsaName(isa.isa()));
}
BENCHMARK(BM_EngineMlp)
    ->ArgNames({"candidates", "isa"})
    ->ArgsProduct({{16, 256, 1024}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);

// One MLP layer of the bench model on one tile of kTileCandidates rows, as ScoreTile runs
// it: layer 0 bottom item share (8 -> 64), 1 bottom (64 -> 32), 2 top (355 -> 256),
// 3 top (256 -> 128), 4 top (128 -> 1). Shows where the MLP's share of peak goes.
void BM_EngineMlpLayer(benchmark::State& state) {
  BenchEnv& env = Env();
  const CpuPlan& plan = env.plan;
  const IsaScope isa(state, state.range(1));
  if (!isa.ok()) return;
  std::vector<const PackedLayer*> layers = {&plan.bottom_item};
  for (const PackedLayer& layer : plan.bottom_rest) layers.push_back(&layer);
  for (const PackedLayer& layer : plan.top) layers.push_back(&layer);
  const PackedLayer& layer = *layers.at(state.range(0));
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kTileCandidates) * layer.in);
  std::vector<float> y(static_cast<size_t>(kTileCandidates) * layer.out);
  for (float& v : x) v = dist(rng);
  for (auto _ : state) {
    LayerForward(layer, kTileCandidates, x.data(), layer.in, y.data(), layer.out);
    benchmark::DoNotOptimize(y.data());
  }
  SetFlopCounters(state, "", 2.0 * layer.in * layer.out * kTileCandidates * state.iterations(),
                  isa.isa());
  state.SetLabel(absl::StrCat(CpuIsaName(isa.isa()), " ", layer.in, "->", layer.out));
}
BENCHMARK(BM_EngineMlpLayer)
    ->ArgNames({"layer", "isa"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {1, 2}})
    ->Unit(benchmark::kMicrosecond);

// Top-K of one request's scores, K = all (top_k 0) and K = 10.
void BM_EngineTopK(benchmark::State& state) {
  const int candidates = static_cast<int>(state.range(0));
  const int k = state.range(1) == 0 ? candidates : static_cast<int>(state.range(1));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> scores(candidates);
  for (float& s : scores) s = dist(rng);
  std::vector<ScoredIndex> out(candidates);
  for (auto _ : state) {
    TopK(scores.data(), candidates, k, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * candidates);
}
BENCHMARK(BM_EngineTopK)
    ->ArgNames({"candidates", "k"})
    ->ArgsProduct({{16, 256, 1024}, {0, 10}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fuserank::engine
