// Microbenchmarks of the hot-row machinery on the serving path, per id unless
// said otherwise, on a 200k-row fp32 table of dim 32 with a 4096-row hot set:
//   HotRows_Probe{Hit,Miss}      HotSet::FindSlot alone, every id a hit / a miss
//   HotRows_ProbeCrafted/fixed   HotRowIndex::Find of uniform rows against rows crafted to
//                                collide under the fixed Fibonacci multiplier (fixed:1) and
//                                under a random one (fixed:0)
//   HotRows_ProbeZipf            FindSlot on Zipf(alpha) ids with the true top 4096 hot
//                                (hit_rate reported), + reading the row from either tier,
//                                against reading every row from the table (hot:0), on
//                                tables of 200k and 2M rows (25.6 MB and 256 MB); it
//                                cycles kZipfIds ids, enough distinct rows that the
//                                rows read do not all stay in the last-level cache
//   HotRows_SketchObserve        FrequencySketch::Observe on Zipf ids (no sampling)
//   HotRows_Sampler/<period>     AccessSampler::ObserveRows per id + one Flush per 4096 ids
//                                into the manager's sketch: the whole counting cost
//   HotRows_SamplerPerId/<p>     the same with Observe() called per id
//   HotRows_SnapshotAcquire      HotRowManager::snapshot() per call, 1-4 threads
//   HotRows_RecordLookups        one per-batch counter add, 1-4 threads
//   HotRows_Rebuild              one Rebuild of a 4096-row set from a filled sketch
// Run: build/bin/fuserank-microbench --benchmark_filter=HotRows
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/hot_rows/access_sampler.h"
#include "engine/hot_rows/frequency_sketch.h"
#include "engine/hot_rows/hot_row_index.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "engine/hot_rows/hot_rows.h"
#include "engine/model.h"

namespace fuserank::engine {
namespace {

constexpr int32_t kRows = 200000;
constexpr int kDim = 32;
constexpr int kCapacity = 4096;
constexpr size_t kIds = 1 << 16;  // ids cycled through (a power of two)
// HotRows_ProbeZipf's cycle: 4M draws touch far more of a table's rows than an L3 holds
// (1 << 16 draws touched ~23k rows, 3 MB, of the 256 MB table: a warm-cache figure).
constexpr size_t kZipfIds = 1 << 22;

// Zipf(alpha) over [0, rows): rank k has weight k^-alpha; rank -> row scattered by an odd
// multiplier mod rows. Returns the ids and, in *top, the rows of the kCapacity top ranks.
std::vector<int32_t> ZipfIds(double alpha, size_t count, std::vector<int32_t>* top,
                             int32_t rows = kRows) {
  std::vector<double> cdf(rows);
  double sum = 0;
  for (int32_t k = 0; k < rows; ++k) cdf[k] = sum += std::pow(k + 1.0, -alpha);
  const auto row_of = [rows](int64_t rank) {
    return static_cast<int32_t>((rank * 2654435761ll + 12345) % rows);
  };
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0.0, sum);
  std::vector<int32_t> ids(count);
  for (int32_t& id : ids) {
    const int64_t rank = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
    id = row_of(std::min<int64_t>(rank, rows - 1));
  }
  if (top != nullptr) {
    top->clear();
    for (int64_t k = 0; k < kCapacity; ++k) top->push_back(row_of(k));
  }
  return ids;
}

struct BenchModel {
  std::vector<float> table;
  std::vector<float> top_weight = std::vector<float>(kDim, 0.01f);
  std::vector<float> top_bias = {0.0f};
  std::shared_ptr<const Model> model;
};

// One item table, concat, top_mlp [1]: the smallest model a HotRowManager can serve.
const BenchModel& GetModel() {
  static const BenchModel* bench = [] {
    auto* b = new BenchModel;
    b->table.resize(static_cast<size_t>(kRows) * kDim);
    for (size_t i = 0; i < b->table.size(); ++i) b->table[i] = static_cast<float>(i % 251) / 251;
    ModelSpec spec;
    spec.name = "hot_rows_bench";
    spec.weights_path = "in-memory.safetensors";
    spec.tables.push_back({"item_0", Side::kItem, kRows, kDim});
    spec.interaction = Interaction::kConcat;
    spec.top_mlp = {1};
    const auto view = [](const std::vector<float>& v, std::vector<int64_t> shape) {
      return TensorView{"F32", std::move(shape), reinterpret_cast<const std::byte*>(v.data()),
                        v.size() * sizeof(float)};
    };
    TensorMap tensors;
    tensors["embeddings.item_0.weight"] = view(b->table, {kRows, kDim});
    tensors["top_mlp.0.weight"] = view(b->top_weight, {1, kDim});
    tensors["top_mlp.0.bias"] = view(b->top_bias, {1});
    auto model = Model::FromTensors(spec, tensors);
    if (!model.ok()) {
      std::fprintf(stderr, "bench model: %s\n", std::string(model.status().message()).c_str());
      std::abort();
    }
    b->model = *model;
    return b;
  }();
  return *bench;
}

std::shared_ptr<const HotSet> TopSet(double alpha) {
  std::vector<int32_t> top;
  ZipfIds(alpha, 1, &top);
  return *HotSet::FromRows(GetModel().model->tables()[0], top, kCapacity);
}

void ProbeIds(benchmark::State& state, const HotSet& set, const std::vector<int32_t>& ids) {
  size_t i = 0;
  int64_t found = 0;
  for (auto _ : state) {
    for (int k = 0; k < 1024; ++k, ++i) found += set.FindSlot(ids[i & (kIds - 1)]) >= 0;
    benchmark::DoNotOptimize(found);
  }
  state.SetItemsProcessed(state.iterations() * 1024);
  state.counters["hit_rate"] =
      static_cast<double>(found) / static_cast<double>(state.iterations() * 1024);
}

void HotRows_ProbeHit(benchmark::State& state) {
  const auto set = TopSet(1.05);
  std::vector<int32_t> ids(kIds);
  std::mt19937_64 rng(1);
  for (int32_t& id : ids) id = set->rows()[rng() % set->size()];
  ProbeIds(state, *set, ids);
}
BENCHMARK(HotRows_ProbeHit);

void HotRows_ProbeMiss(benchmark::State& state) {
  const auto set = TopSet(1.05);
  std::vector<int32_t> ids;
  std::mt19937_64 rng(2);
  while (ids.size() < kIds) {
    const int32_t row = static_cast<int32_t>(rng() % kRows);
    if (set->FindSlot(row) < 0) ids.push_back(row);
  }
  ProbeIds(state, *set, ids);
}
BENCHMARK(HotRows_ProbeMiss);

// The index of a set of kCapacity rows crafted to share the first 256 of 8192 homes under
// the fixed Fibonacci multiplier, built with that multiplier (fixed:1) or with a random one
// as HotSet builds it (fixed:0), probed with uniform rows of the table (nearly all misses,
// as most of a request's ids are): what such a set costs every lookup.
void HotRows_ProbeCrafted(benchmark::State& state) {
  constexpr uint32_t kFibonacci = 0x9E3779B1u;
  std::vector<int32_t> rows;
  for (int32_t r = 0; static_cast<int>(rows.size()) < kCapacity && r < kRows; ++r) {
    if (HotRowIndex::Home(r, kFibonacci, 19) < 256) rows.push_back(r);
  }
  if (static_cast<int>(rows.size()) < kCapacity) state.SkipWithError("too few crafted rows");
  const HotRowIndex index = state.range(0) != 0 ? HotRowIndex(rows, kFibonacci) : HotRowIndex(rows);
  std::vector<int32_t> ids(kIds);
  std::mt19937_64 rng(3);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % kRows);
  size_t i = 0;
  int64_t found = 0;
  for (auto _ : state) {
    for (int k = 0; k < 1024; ++k, ++i) found += index.Find(ids[i & (kIds - 1)]) >= 0;
    benchmark::DoNotOptimize(found);
  }
  state.SetItemsProcessed(state.iterations() * 1024);
  state.counters["longest_run"] = static_cast<double>(index.LongestRun());
}
BENCHMARK(HotRows_ProbeCrafted)->ArgName("fixed")->Arg(1)->Arg(0);

// A plain fp32 table of `rows` x kDim (no model), kept for the whole run.
const EmbeddingTable& RawTable(int32_t rows) {
  static auto* tables = new std::map<int32_t, std::pair<std::vector<float>, EmbeddingTable>>;
  auto [it, inserted] = tables->try_emplace(rows);
  if (inserted) {
    std::vector<float>& values = it->second.first;
    values.resize(static_cast<size_t>(rows) * kDim);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 251) / 251;
    EmbeddingTable& table = it->second.second;
    table.name = "raw";
    table.rows = rows;
    table.dim = kDim;
    table.row_bytes = kDim * sizeof(float);
    table.data = reinterpret_cast<const std::byte*>(values.data());
  }
  return it->second.second;
}

// Probe + read the row (kDim floats, accumulated) from the hot copy on a hit, else from
// the table; hot:0 reads every row from the table (no probe). Args: table rows, alpha x100.
void HotRows_ProbeZipf(benchmark::State& state) {
  const int32_t rows = static_cast<int32_t>(state.range(0));
  const double alpha = state.range(1) / 100.0;
  const bool use_hot = state.range(2) != 0;
  const EmbeddingTable& table = RawTable(rows);
  // Drawn once per (rows, alpha): 4M draws take seconds.
  static std::map<std::pair<int32_t, int64_t>,
                  std::pair<std::vector<int32_t>, std::vector<int32_t>>>
      draws;
  auto& [ids, top] = draws[{rows, state.range(1)}];
  if (ids.empty()) ids = ZipfIds(alpha, kZipfIds, &top, rows);
  const auto set = *HotSet::FromRows(table, top, kCapacity);
  size_t i = 0;
  int64_t hits = 0;
  float acc[kDim] = {};  // independent lanes: the loads, not an add chain, set the pace
  for (auto _ : state) {
    for (int k = 0; k < 1024; ++k, ++i) {
      const int32_t row = ids[i & (kZipfIds - 1)];
      const std::byte* bytes = use_hot ? set->FindRow(row) : nullptr;
      hits += bytes != nullptr;
      if (bytes == nullptr) bytes = table.data + static_cast<size_t>(row) * table.row_bytes;
      const float* v = reinterpret_cast<const float*>(bytes);
      for (int d = 0; d < kDim; ++d) acc[d] += v[d];
    }
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(state.iterations() * 1024);
  state.counters["hit_rate"] =
      static_cast<double>(hits) / static_cast<double>(state.iterations() * 1024);
}
BENCHMARK(HotRows_ProbeZipf)
    ->ArgsProduct({{kRows, 10 * kRows}, {105, 120}, {0, 1}})
    ->ArgNames({"rows", "alpha100", "hot"});

void HotRows_SketchObserve(benchmark::State& state) {
  const std::vector<int32_t> ids = ZipfIds(1.05, kIds, nullptr);
  FrequencySketch sketch(FrequencySketch::OptionsForCapacity(kCapacity));
  size_t i = 0;
  for (auto _ : state) {
    for (int k = 0; k < 1024; ++k, ++i) sketch.Observe(ids[i & (kIds - 1)]);
  }
  state.SetItemsProcessed(state.iterations() * 1024);
}
BENCHMARK(HotRows_SketchObserve);

std::unique_ptr<HotRowManager> MakeManager(int period) {
  HotRowOptions options;
  options.capacity = kCapacity;
  options.sample_period = period;
  return *HotRowManager::Create(GetModel().model, options);
}

// A "batch" = 4096 ids of table 0, then one Flush.
void HotRows_Sampler(benchmark::State& state) {
  auto manager = MakeManager(static_cast<int>(state.range(0)));
  AccessSampler sampler(manager.get());
  const std::vector<int32_t> ids = ZipfIds(1.05, kIds, nullptr);
  size_t i = 0;
  for (auto _ : state) {
    sampler.ObserveRows(0, absl::MakeConstSpan(ids).subspan(i, 4096));
    sampler.Flush();
    i = (i + 4096) & (kIds - 1);
  }
  state.SetItemsProcessed(state.iterations() * 4096);
}
BENCHMARK(HotRows_Sampler)->Arg(1)->Arg(16)->Arg(64)->Arg(256);

void HotRows_SamplerPerId(benchmark::State& state) {
  auto manager = MakeManager(static_cast<int>(state.range(0)));
  AccessSampler sampler(manager.get());
  const std::vector<int32_t> ids = ZipfIds(1.05, kIds, nullptr);
  size_t i = 0;
  for (auto _ : state) {
    for (int k = 0; k < 4096; ++k, ++i) sampler.Observe(0, ids[i & (kIds - 1)]);
    sampler.Flush();
  }
  state.SetItemsProcessed(state.iterations() * 4096);
}
BENCHMARK(HotRows_SamplerPerId)->Arg(1)->Arg(16)->Arg(64)->Arg(256);

// A whole Rebuild of one table (capacity 4096) whose sketch has seen 1M Zipf(1.05) ids:
// TopN under the sketch mutex, the new HotSet, the swap, then Decay under the mutex.
void HotRows_Rebuild(benchmark::State& state) {
  auto manager = MakeManager(1);
  const std::vector<int32_t> ids = ZipfIds(1.05, 1 << 20, nullptr);
  manager->ObserveRows(0, ids);
  for (auto _ : state) {
    auto status = manager->Rebuild({});
    benchmark::DoNotOptimize(status);
    state.PauseTiming();
    manager->ObserveRows(0, absl::MakeConstSpan(ids).subspan(0, 1 << 16));  // keep it warm
    state.ResumeTiming();
  }
  state.counters["hot_rows"] = manager->snapshot()->table(0).size();
}
BENCHMARK(HotRows_Rebuild)->Unit(benchmark::kMicrosecond);

HotRowManager* SharedManager() {
  static HotRowManager* manager = MakeManager(16).release();
  return manager;
}

void HotRows_SnapshotAcquire(benchmark::State& state) {
  HotRowManager* manager = SharedManager();
  for (auto _ : state) {
    std::shared_ptr<const HotRowSnapshot> snapshot = manager->snapshot();
    benchmark::DoNotOptimize(snapshot.get());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(HotRows_SnapshotAcquire)->ThreadRange(1, 4)->UseRealTime();

void HotRows_RecordLookups(benchmark::State& state) {
  HotRowManager* manager = SharedManager();
  for (auto _ : state) manager->RecordLookups(0, 3000, 1000);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(HotRows_RecordLookups)->ThreadRange(1, 4)->UseRealTime();

}  // namespace
}  // namespace fuserank::engine
