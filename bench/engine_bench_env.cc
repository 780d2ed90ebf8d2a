#include "bench/engine_bench_env.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_fma_probe.h"
#include "engine/cpu/cpu_forward.h"
#include "engine/cpu/cpu_mlp.h"

namespace fuserank::engine::bench {
namespace {

constexpr int kDim = 32;

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

}  // namespace

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

IsaScope::IsaScope(benchmark::State& state, int64_t arg) {
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

IsaScope::~IsaScope() {
  if (forced_) ForceCpuIsa(std::nullopt);
}

double PeakGflops(CpuIsa isa) {
  static double peak[3] = {0, 0, 0};
  double& p = peak[static_cast<int>(isa)];
  if (p == 0) p = MeasureFmaGflops(isa, 1000000, 25);
  return p;
}

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

void SetFlopCounters(benchmark::State& state, const std::string& prefix, double flops, CpuIsa isa) {
  state.counters[prefix + "GFLOPs"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters[prefix + "of_peak"] =
      benchmark::Counter(flops * 1e-9 / PeakGflops(isa), benchmark::Counter::kIsRate);
}

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

void SetStageCounters(benchmark::State& state, const StageTimes& stages) {
  const double n = static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["lookup_us"] = 1e6 * stages.lookup / n;
  state.counters["cross_us"] = 1e6 * stages.cross / n;
  state.counters["dnn_us"] = 1e6 * stages.dnn / n;
  state.counters["topk_us"] = 1e6 * stages.topk / n;
}

void TimeMlpTiles(benchmark::State& state, const CpuPlan& plan, int candidates) {
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
}

}  // namespace fuserank::engine::bench
