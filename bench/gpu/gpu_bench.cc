// fuserank-gpu-bench: the GPU figures, in one run on one GPU.
//   1. device-to-device copy bandwidth (the ceiling);
//   2. fused lookup bandwidth at >= 64k lookups of 128-byte rows (lookup_bench.cc);
//   3. per-batch device time of the bench model (26 tables, dim 32, dot, 256-128-1) for
//      1 request of 16, 256 and 1024 candidates, graphs on and off: copy in, kernels,
//      copy out, timed with CUDA events by the backend; launches per batch; the L2
//      flushed before each run (cold), and for the first configuration also not (warm);
//   4. the same with cache.placement: host, Zipf traffic, with and without hot rows
//      (host_tables_bench.cc);
//   5. hot rows staged in shared memory against the plain lookup (smem_staging_bench.cc:
//      an experiment, measured before anything of it enters the server).
// Prints a readable line and a JSON line per figure (summarize.py reads the JSON).
// usage: fuserank-gpu-bench [--quick]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/gpu/bench_batches.h"
#include "bench/gpu/bench_timer.h"
#include "bench/gpu/host_tables_bench.h"
#include "bench/gpu/lookup_bench.h"
#include "bench/gpu/smem_staging_bench.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_memory.h"
#include "tests/testing/test_model.h"

namespace fuserank::bench {
namespace {

using engine::Batch;
using engine::BatchResult;

double CopyBandwidth(DeviceTimer& timer) {
  const size_t bytes = size_t{1} << 30;
  auto a = engine::cuda::DeviceBuffer::Allocate(bytes, "copy source");
  auto b = engine::cuda::DeviceBuffer::Allocate(bytes, "copy target");
  if (!a.ok() || !b.ok()) std::exit(1);
  const double t = timer.Time(
      [&](cudaStream_t s) {
        Check(cudaMemcpyAsync(b->get(), a->get(), bytes, cudaMemcpyDeviceToDevice, s), "copy");
      },
      10);
  const double gbps = 2.0 * bytes / t / 1e9;  // read + write
  std::printf("device-to-device copy: %.0f GB/s (1 GiB, read + write counted)\n", gbps);
  JsonLine("copy").Add("gbps", gbps).Print();
  return gbps;
}

// The bench model of bench/models/gen_bench_model.sh (random weights, same shapes).
engine::ModelSpec BenchSpec() {
  engine::ModelSpec spec;
  spec.name = "bench";
  spec.version = "1";
  spec.weights_path = "bench.safetensors";
  for (int t = 0; t < 26; ++t) {
    const bool user = t < 8;
    const int i = user ? t : t - 8;
    const int64_t rows = (user ? i < 4 : i < 9) ? 200000 : 1000;
    spec.tables.push_back({absl::StrCat(user ? "user_" : "item_", i),
                           user ? engine::Side::kUser : engine::Side::kItem, rows, 32});
  }
  spec.dense_user = 5;
  spec.dense_item = 8;
  spec.bottom_mlp = {64, 32};
  spec.interaction = engine::Interaction::kDot;
  spec.top_mlp = {256, 128, 1};
  return spec;
}

// Distinct batches cycled per size by the per-batch benches. The 9 large item tables give
// 64 x n uniform draws each of 128-byte rows out of 200k: about 1.2 MB at 16 candidates and
// 18 MB at 256, which fit in the L2 (50 MB on an H100, 60 MB on an H200), and 64 MB at
// 1024, which nearly does. So once the pool has been through, a run finds most of its rows
// where the runs before it left them: cycling alone measures a warm L2.
constexpr int kBatchPool = 64;

// What a timed run finds in the L2. kFlushed writes 4x the L2 before each run (as the lookup
// benches do, bench_timer.h), so its rows come from device memory, and so do the model's
// weights, which a server under load would keep in L2: for a server's batch the cold
// figure leans pessimistic and the warm one optimistic.
enum class L2 { kWarm, kFlushed };

struct BatchBenchConfig {
  bool graphs = true;
  bool reorder = false;
  bool stage_events = true;
  bool autotune = true;
  L2 l2 = L2::kFlushed;
  bool print_choices = false;
};

// One request of n candidates, one id per bag, uniform rows; top 100 (or all).
Batch OneRequest(std::shared_ptr<const engine::Model> model, uint32_t n, std::mt19937_64& rng) {
  return OneRequestBatch(model, n, rng, [&](int t, std::mt19937_64& g) {
    return static_cast<int32_t>(g() % model->tables()[t].rows);
  });
}

// "first -> kept us", or why there are no times (one proposal ran, or timing failed).
std::string TimesText(const engine::cuda::AlgoChoice& c) {
  if (c.first_us <= 0) return c.ran > 1 ? "not timed (timing failed)" : "not timed (one ran)";
  char text[64];
  std::snprintf(text, sizeof text, "%.1f -> %.1f us", c.first_us, c.chosen_us);
  return text;
}

// The algorithms the MLP plans chose at the batch sizes benched, with the autotune's
// times per matmul (the heuristic's first that ran -> the one kept).
void PrintMlpChoices(const engine::cuda::CudaBackend& backend) {
  for (const auto& [name, plan] : backend.mlp_plans()) {
    for (size_t l = 0; l < plan->num_layers(); ++l) {
      for (size_t b = 0; b < plan->buckets().size(); ++b) {
        const uint32_t rows = plan->buckets()[b];
        if (rows != 16 && rows != 256 && rows != 1024) continue;
        const engine::cuda::AlgoChoice& c = plan->choice(l, b);
        const engine::cuda::MlpLayerShape& s = plan->shape(l);
        std::printf(
            "mlp %s layer %zu (%d -> %d), %u rows: kept the heuristic's proposal %d (0: its "
            "first), %d ran, %s\n",
            name.c_str(), l, s.in, s.out, rows, c.index, c.ran, TimesText(c).c_str());
        JsonLine("mlp_algo")
            .Add("plan", name)
            .Add("layer", static_cast<int>(l))
            .Add("in", s.in)
            .Add("out", s.out)
            .Add("rows", rows)
            .Add("index", c.index)
            .Add("ran", c.ran)
            .Add("first_us", c.first_us)
            .Add("chosen_us", c.chosen_us)
            .Print();
      }
    }
  }
}

void RunBatchBenches(std::shared_ptr<const engine::Model> model, const BatchBenchConfig& config,
                     int reps, DeviceTimer& timer) {
  engine::BackendOptions options;
  options.workers = 1;
  options.cuda_graphs = config.graphs;
  options.max_batch_candidates = 8192;
  engine::cuda::CudaOptions cuda_options;
  cuda_options.reorder_ids = config.reorder;
  cuda_options.graph_stage_events = config.stage_events;
  cuda_options.stage_sample_period = 1;  // every replay timed: what the event nodes cost
  cuda_options.mlp_autotune = config.autotune;
  auto backend = engine::cuda::CudaBackend::Create(model, options, cuda_options);
  if (!backend.ok()) {
    std::fprintf(stderr, "CudaBackend: %s\n", backend.status().ToString().c_str());
    std::exit(1);
  }
  if (config.print_choices) PrintMlpChoices(**backend);
  const bool flushed = config.l2 == L2::kFlushed;
  std::mt19937_64 rng(7);
  for (uint32_t n : {16u, 256u, 1024u}) {
    // A pool of distinct batches, cycled (kBatchPool: warm unless the L2 is flushed).
    std::vector<Batch> pool;
    for (int p = 0; p < kBatchPool; ++p) pool.push_back(OneRequest(model, n, rng));
    BatchResult result;
    std::vector<double> device, wall, lookup, cross, dnn, topk;
    for (int i = 0; i < 20 + reps; ++i) {
      const Batch& batch = pool[static_cast<size_t>(i) % pool.size()];
      if (flushed) timer.FlushL2();  // done before the clock starts: in neither time
      const auto t0 = std::chrono::steady_clock::now();
      const absl::Status st = (*backend)->Run(0, batch, &result);
      const double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!st.ok()) {
        std::fprintf(stderr, "Run: %s\n", st.ToString().c_str());
        std::exit(1);
      }
      if (i < 20) continue;  // warm-up (graph capture included)
      device.push_back((*backend)->stats(0).last_device_seconds);
      wall.push_back(w);
      lookup.push_back(result.stages.lookup);
      cross.push_back(result.stages.cross);
      dnn.push_back(result.stages.dnn);
      topk.push_back(result.stages.topk);
    }
    const auto& stats = (*backend)->stats(0);
    std::printf(
        "batch of %4u (pool of %d, L2 %-7s): graphs %-3s stage events %d reorder %d autotune %d"
        "  device %7.1f us (p99 %7.1f)  wall %7.1f us  launches %d",
        n, kBatchPool, flushed ? "flushed" : "warm", config.graphs ? "on" : "off",
        config.stage_events ? 1 : 0, config.reorder ? 1 : 0, config.autotune ? 1 : 0,
        Median(device) * 1e6, Percentile(device, 0.99) * 1e6, Median(wall) * 1e6,
        stats.last_launches);
    if (!config.graphs || config.stage_events) {
      std::printf("  [lookup %.1f cross %.1f dnn %.1f topk %.1f us]", Median(lookup) * 1e6,
                  Median(cross) * 1e6, Median(dnn) * 1e6, Median(topk) * 1e6);
    }
    std::printf("%s\n",
                stats.graph_error.empty() ? "" : (" graph error: " + stats.graph_error).c_str());
    JsonLine("batch")
        .Add("candidates", n)
        .Add("pool", kBatchPool)
        .Add("l2_flushed", flushed ? 1 : 0)
        .Add("graphs", config.graphs ? 1 : 0)
        .Add("stage_events", config.stage_events ? 1 : 0)
        .Add("reorder", config.reorder ? 1 : 0)
        .Add("autotune", config.autotune ? 1 : 0)
        .Add("device_us", Median(device) * 1e6)
        .Add("device_us_p99", Percentile(device, 0.99) * 1e6)
        .Add("wall_us", Median(wall) * 1e6)
        .Add("launches", stats.last_launches)
        .Add("lookup_us", Median(lookup) * 1e6)
        .Add("cross_us", Median(cross) * 1e6)
        .Add("dnn_us", Median(dnn) * 1e6)
        .Add("topk_us", Median(topk) * 1e6)
        .Print();
  }
}

}  // namespace
}  // namespace fuserank::bench

int main(int argc, char** argv) {
  using namespace fuserank::bench;
  // --help before the device check: it needs no GPU.
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf(
          "usage: fuserank-gpu-bench [--quick]\n  the GPU figures of docs/gpu.md on "
          "GPU 0; --quick: fewer repetitions\n");
      return 0;
    }
    if (std::strcmp(argv[i], "--quick") != 0) {
      std::fprintf(stderr, "fuserank-gpu-bench: unknown argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
    quick = true;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "fuserank-gpu-bench: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop = {};
  Check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("device: %s, sm_%d%d, %d SMs, L2 %d MB\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, prop.l2CacheSize >> 20);
  JsonLine("device").Add("name", prop.name).Add("sms", prop.multiProcessorCount).Print();
  DeviceTimer timer(static_cast<size_t>(prop.l2CacheSize));
  const double copy_gbps = CopyBandwidth(timer);
  RunLookupBenches(timer, copy_gbps);

  auto model =
      fuserank::testing::BuildTestModel(fuserank::testing::MakeRandomModel(BenchSpec(), 3));
  if (!model.ok()) {
    std::fprintf(stderr, "bench model: %s\n", model.status().ToString().c_str());
    return 1;
  }
  const int reps = quick ? 50 : 300;
  // Cold (the L2 flushed before each run), every configuration.
  RunBatchBenches(*model, {.print_choices = true}, reps, timer);
  // The MLPs on the heuristic's first algorithms: what the autotune gains.
  RunBatchBenches(*model, {.autotune = false}, reps, timer);
  // The same graphs without their stage events: what the event nodes cost a replay.
  RunBatchBenches(*model, {.stage_events = false}, reps, timer);
  RunBatchBenches(*model, {.graphs = false}, reps, timer);
  RunBatchBenches(*model, {.reorder = true}, reps, timer);
  // Warm: the pool cycled with the L2 as the runs before left it, as every run up to run 4
  // measured (those figures are warm-L2 ones).
  RunBatchBenches(*model, {.l2 = L2::kWarm}, reps, timer);
  RunHostTableBenches(*model, quick ? 30 : 100);
  // Last: an experiment that has not run on a GPU before, so that a failure of it (which
  // ends the process) costs none of the figures above.
  RunSmemStagingBenches(timer, prop.multiProcessorCount);
  return 0;
}
