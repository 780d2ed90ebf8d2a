// Microbenchmarks of the CPU engine on the bench model, built in memory with
// random weights (no files): 26 tables of dim 32 (8 user: 4 x 200k + 4 x 1000 rows;
// 18 item: 9 x 200k + 9 x 1000 rows, fp32), 13 dense (5 user + 8 item), bottom 64-32,
// dot, top 256-128-1. Ids are Zipf(1.05) ranks scattered over the rows, one id per bag
// (the load generator's defaults). Each stage is timed on its own (lookup, interaction,
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

constexpr int kDim = 32;
constexpr int kBatchesPerSize = 16;  // distinct batches cycled through, so rows vary

ModelSpec BenchSpec() {
  ModelSpec spec;
  spec.name = "bench";
  spec.version = "1";
  spec.weights_path = "in-memory.safetensors";
  for (int t = 0; t < 26; ++t) {
    const bool user = t < 8;
    const int within = user ? t : t - 8;
    const bool large = user ? within < 4 : within < 9;
    spec.tables.push_back({absl::StrCat(user ? "user_" : "item_", within),
                           user ? Side::kUser : Side::kItem, large ? 200000 : 1000, kDim});
  }
  spec.dense_user = 5;
  spec.dense_item = 8;
  spec.bottom_mlp = {64, 32};
  spec.interaction = Interaction::kDot;
  spec.top_mlp = {256, 128, 1};
  return spec;
}

struct Storage {
  std::vector<std::vector<float>> buffers;
  TensorMap tensors;

  void Add(const std::string& name, std::vector<int64_t> shape, float scale, uint64_t seed) {
    size_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(n);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;  // xorshift: fast for 300 MB of tables
    for (float& v : values) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      v = scale * (static_cast<float>(x >> 40) / static_cast<float>(1 << 24) - 0.5f);
    }
    buffers.push_back(std::move(values));
    tensors[name] = TensorView{
        "F32", shape, reinterpret_cast<const std::byte*>(buffers.back().data()), n * sizeof(float)};
  }
};

std::shared_ptr<const Model> BuildBenchModel() {
  const ModelSpec spec = BenchSpec();
  Storage storage;
  storage.buffers.reserve(64);
  uint64_t seed = 1;
  for (const TableSpec& t : spec.tables) {
    storage.Add(absl::StrCat("embeddings.", t.name, ".weight"), {t.rows, t.dim}, 0.2f, seed++);
  }
  auto add_layers = [&](const std::string& prefix, int in, const std::vector<int>& widths) {
    for (size_t i = 0; i < widths.size(); ++i) {
      const float scale = 2.0f / std::sqrt(static_cast<float>(in));
      storage.Add(absl::StrCat(prefix, ".", i, ".weight"), {widths[i], in}, scale, seed++);
      storage.Add(absl::StrCat(prefix, ".", i, ".bias"), {widths[i]}, 0.1f, seed++);
      in = widths[i];
    }
  };
  add_layers("bottom_mlp", spec.dense_total(), spec.bottom_mlp);
  add_layers("top_mlp", spec.interaction_width(), spec.top_mlp);
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::FromTensors(spec, storage.tensors);
  if (!model.ok()) {
    std::fprintf(stderr, "bench model: %s\n", std::string(model.status().message()).c_str());
    std::abort();
  }
  return *model;
}

// Zipf(alpha) ranks over [0, n) by inverse CDF, scattered by an odd multiplier mod n.
class ZipfRows {
 public:
  ZipfRows(int64_t n, double alpha) : n_(n), cdf_(n) {
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) cdf_[k] = sum += std::pow(static_cast<double>(k + 1), -alpha);
    for (double& c : cdf_) c /= sum;
  }
  int32_t Sample(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const int64_t rank = std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
    return static_cast<int32_t>((std::min(rank, n_ - 1) * 2654435761ll + 12345) % n_);
  }

 private:
  int64_t n_;
  std::vector<double> cdf_;
};

struct BenchEnv {
  std::shared_ptr<const Model> model;
  CpuPlan plan;
  std::vector<std::vector<Batch>> batches;  // by size index: kBatchesPerSize each
};

constexpr int kSizes[] = {16, 256, 1024};

Batch RandomBatch(const Model& model, int candidates, std::mt19937_64& rng, const ZipfRows& large,
                  const ZipfRows& small) {
  Batch batch;
  batch.candidate_begin.push_back(candidates);
  batch.top_k.push_back(candidates);
  std::uniform_real_distribution<float> dense(-1.0f, 1.0f);
  auto add_bag = [&](BagSet& set, const EmbeddingTable& table) {
    set.rows.push_back((table.rows > 1000 ? large : small).Sample(rng));
    set.weights.push_back(1.0f);
    set.bag_begin.push_back(set.rows.size());
  };
  for (int t : model.user_tables()) add_bag(batch.user, model.tables()[t]);
  for (int i = 0; i < model.spec().dense_user; ++i) batch.user_dense.push_back(dense(rng));
  for (int c = 0; c < candidates; ++c) {
    for (int t : model.item_tables()) add_bag(batch.item, model.tables()[t]);
    for (int i = 0; i < model.spec().dense_item; ++i) batch.item_dense.push_back(dense(rng));
  }
  return batch;
}

BenchEnv& Env() {
  static BenchEnv* env = [] {
    auto* e = new BenchEnv;
    e->model = BuildBenchModel();
    e->plan = *BuildCpuPlan(*e->model);
    std::mt19937_64 rng(3);
    const ZipfRows large(200000, 1.05), small(1000, 1.05);
    for (int size : kSizes) {
      e->batches.emplace_back();
      for (int b = 0; b < kBatchesPerSize; ++b) {
        e->batches.back().push_back(RandomBatch(*e->model, size, rng, large, small));
        e->batches.back().back().model = e->model;
      }
    }
    return e;
  }();
  return *env;
}

int SizeIndex(int candidates) {
  for (int i = 0; i < 3; ++i) {
    if (kSizes[i] == candidates) return i;
  }
  return 0;
}

// The `isa` argument of a benchmark: forces that ISA for its lifetime (0: none).
class IsaScope {
 public:
  explicit IsaScope(benchmark::State& state, int64_t arg) {
    if (arg == 0) {
      isa_ = ActiveCpuIsa();
      return;
    }
    isa_ = static_cast<CpuIsa>(arg);
    if (!CpuSupports(isa_)) {
      state.SkipWithError(absl::StrCat("this CPU lacks ", CpuIsaName(isa_)).c_str());
      ok_ = false;
      return;
    }
    ForceCpuIsa(isa_);
    forced_ = true;
  }
  ~IsaScope() {
    if (forced_) ForceCpuIsa(std::nullopt);
  }
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
double PeakGflops(CpuIsa isa) {
  static double peak[3] = {0, 0, 0};
  double& p = peak[static_cast<int>(isa)];
  if (p == 0) p = MeasureFmaGflops(isa, 1000000, 25);
  return p;
}

// Multiply-add FLOPs per candidate of the MLP layers ScoreTile runs (bottom item share,
// bottom rest, top), and of the per-candidate dots.
double MlpFlops(const CpuPlan& plan) {
  double flops = 0;
  auto add = [&](const PackedLayer& layer) { flops += 2.0 * layer.in * layer.out; };
  if (plan.has_bottom) add(plan.bottom_item);
  for (const PackedLayer& layer : plan.bottom_rest) add(layer);
  for (const PackedLayer& layer : plan.top) add(layer);
  return flops;
}
double InteractionFlops(const CpuPlan& plan) {
  return plan.dot ? 2.0 * plan.dot_dim * (plan.row_width - plan.z_width) : 0.0;
}

// GFLOP/s of `flops_per_iteration` and its share of `isa`'s peak, as rate counters.
void SetFlopCounters(benchmark::State& state, const std::string& prefix, double flops, CpuIsa isa) {
  state.counters[prefix + "GFLOPs"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters[prefix + "of_peak"] =
      benchmark::Counter(flops * 1e-9 / PeakGflops(isa), benchmark::Counter::kIsRate);
}

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

// The timed loop of the Run() benchmarks: worker 0 runs the batches in turn; returns the
// stage seconds summed over the iterations.
StageTimes RunBatches(benchmark::State& state, Backend& backend,
                      const std::vector<Batch>& batches) {
  BatchResult result;
  StageTimes stages;
  size_t i = 0;
  for (auto _ : state) {
    if (absl::Status status = backend.Run(0, batches[i++ % batches.size()], &result);
        !status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      break;
    }
    stages.lookup += result.stages.lookup;
    stages.cross += result.stages.cross;
    stages.dnn += result.stages.dnn;
    stages.topk += result.stages.topk;
  }
  return stages;
}

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
  const double n = static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["lookup_us"] = 1e6 * stages.lookup / n;
  state.counters["cross_us"] = 1e6 * stages.cross / n;
  state.counters["dnn_us"] = 1e6 * stages.dnn / n;
  state.counters["topk_us"] = 1e6 * stages.topk / n;
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
  for (auto _ : state) {
    DotGramRows(user.data(), num_user, items.data(), plan.own_vectors, plan.item_stride,
                plan.dot_dim, candidates, rows.data() + plan.z_width, plan.row_stride);
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

// Bottom (item share of layer 0, then 64 -> 32) and top (383 -> 256 -> 128 -> 1) MLPs
// in tiles of kTileCandidates, as ScoreTile runs them.
void BM_EngineMlp(benchmark::State& state) {
  BenchEnv& env = Env();
  const CpuPlan& plan = env.plan;
  const int candidates = static_cast<int>(state.range(0));
  const IsaScope isa(state, state.range(1));
  if (!isa.ok()) return;
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int width = plan.max_layer_width;
  std::vector<float> dense(static_cast<size_t>(kTileCandidates) * plan.dense_item);
  std::vector<float> rows(static_cast<size_t>(kTileCandidates) * plan.row_stride);
  std::vector<float> ping(static_cast<size_t>(kTileCandidates) * width), pong(ping.size());
  std::vector<float> bias(width), logits(kTileCandidates);
  for (auto* v : {&dense, &rows, &bias}) {
    for (float& x : *v) x = dist(rng);
  }
  for (auto _ : state) {
    for (int first = 0; first < candidates; first += kTileCandidates) {
      const int m = std::min(kTileCandidates, candidates - first);
      LayerForward(plan.bottom_item, m, dense.data(), plan.dense_item, ping.data(), width,
                   bias.data());
      LayerForward(plan.bottom_rest[0], m, ping.data(), width, rows.data(), plan.row_stride);
      LayerForward(plan.top[0], m, rows.data(), plan.row_stride, ping.data(), width, bias.data());
      LayerForward(plan.top[1], m, ping.data(), width, pong.data(), width);
      LayerForward(plan.top[2], m, pong.data(), width, logits.data(), 1);
      Sigmoid(logits.data(), m, 1, logits.data());
    }
    benchmark::DoNotOptimize(logits.data());
  }
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
