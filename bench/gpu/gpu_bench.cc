// fuserank-gpu-bench: the GPU figures, in one run on one GPU.
//   1. device-to-device copy bandwidth (the ceiling);
//   2. fused lookup bandwidth at >= 64k lookups of 128-byte rows (lookup_bench.cc);
//   3. per-batch device time of the bench model (26 tables, dim 32, dot, 256-128-1) for
//      1 request of 16, 256 and 1024 candidates, graphs on and off: copy in, kernels,
//      copy out, timed with CUDA events by the backend; launches per batch;
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

// Distinct batches cycled per size by the per-batch benches.
constexpr int kBatchPool = 64;

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

void RunBatchBenches(std::shared_ptr<const engine::Model> model, bool graphs, bool reorder,
                     int reps, bool stage_events = true, bool autotune = true,
                     bool print_choices = false) {
  engine::BackendOptions options;
  options.workers = 1;
  options.cuda_graphs = graphs;
  options.max_batch_candidates = 8192;
  engine::cuda::CudaOptions cuda_options;
  cuda_options.reorder_ids = reorder;
  cuda_options.graph_stage_events = stage_events;
  cuda_options.stage_sample_period = 1;  // every replay timed: what the event nodes cost
  cuda_options.mlp_autotune = autotune;
  auto backend = engine::cuda::CudaBackend::Create(model, options, cuda_options);
  if (!backend.ok()) {
    std::fprintf(stderr, "CudaBackend: %s\n", backend.status().ToString().c_str());
    std::exit(1);
  }
  if (print_choices) PrintMlpChoices(**backend);
  std::mt19937_64 rng(7);
  for (uint32_t n : {16u, 256u, 1024u}) {
    // A pool of distinct batches, cycled: each run reads other rows than the last, so the
    // device time is not that of rows already in L2 (the pool's rows are still a small
    // share of the tables, as a real stream of requests' are).
    std::vector<Batch> pool;
    for (int p = 0; p < kBatchPool; ++p) pool.push_back(OneRequest(model, n, rng));
    BatchResult result;
    std::vector<double> device, wall, lookup, cross, dnn, topk;
    for (int i = 0; i < 20 + reps; ++i) {
      const Batch& batch = pool[static_cast<size_t>(i) % pool.size()];
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
        "batch of %4u (pool of %d): graphs %-3s stage events %d reorder %d autotune %d  device"
        " %7.1f us (p99 %7.1f)  wall %7.1f us  launches %d",
        n, kBatchPool, graphs ? "on" : "off", stage_events ? 1 : 0, reorder ? 1 : 0,
        autotune ? 1 : 0, Median(device) * 1e6, Percentile(device, 0.99) * 1e6, Median(wall) * 1e6,
        stats.last_launches);
    if (!graphs || stage_events) {
      std::printf("  [lookup %.1f cross %.1f dnn %.1f topk %.1f us]", Median(lookup) * 1e6,
                  Median(cross) * 1e6, Median(dnn) * 1e6, Median(topk) * 1e6);
    }
    std::printf("%s\n",
                stats.graph_error.empty() ? "" : (" graph error: " + stats.graph_error).c_str());
    JsonLine("batch")
        .Add("candidates", n)
        .Add("pool", kBatchPool)
        .Add("graphs", graphs ? 1 : 0)
        .Add("stage_events", stage_events ? 1 : 0)
        .Add("reorder", reorder ? 1 : 0)
        .Add("autotune", autotune ? 1 : 0)
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
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
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
  RunBatchBenches(*model, /*graphs=*/true, /*reorder=*/false, reps, /*stage_events=*/true,
                  /*autotune=*/true, /*print_choices=*/true);
  // The MLPs on the heuristic's first algorithms: what the autotune gains.
  RunBatchBenches(*model, /*graphs=*/true, /*reorder=*/false, reps, /*stage_events=*/true,
                  /*autotune=*/false);
  // The same graphs without their stage events: what the event nodes cost a replay.
  RunBatchBenches(*model, /*graphs=*/true, /*reorder=*/false, reps, /*stage_events=*/false);
  RunBatchBenches(*model, /*graphs=*/false, /*reorder=*/false, reps);
  RunBatchBenches(*model, /*graphs=*/true, /*reorder=*/true, reps);
  RunHostTableBenches(*model, quick ? 30 : 100);
  // Last: an experiment that has not run on a GPU before, so that a failure of it (which
  // ends the process) costs none of the figures above.
  RunSmemStagingBenches(timer, prop.multiProcessorCount);
  return 0;
}
