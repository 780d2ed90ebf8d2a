#include "bench/gpu/host_tables_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/gpu/bench_batches.h"
#include "bench/gpu/bench_timer.h"
#include "bench/gpu/zipf.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/hot_rows/hot_row_manager.h"

namespace fuserank::bench {
namespace {

using engine::Batch;
using engine::BatchResult;

constexpr int kHotRows = 4096;
constexpr int kBatchPool = 64;

std::unique_ptr<engine::cuda::CudaBackend> Backend(std::shared_ptr<const engine::Model> model,
                                                   engine::HotRowManager* hot_rows) {
  engine::BackendOptions options;
  options.workers = 1;
  options.max_batch_candidates = 8192;
  options.hot_rows = hot_rows;
  options.host_tables = hot_rows != nullptr;
  engine::cuda::CudaOptions cuda_options;
  cuda_options.hot_count_interval = absl::ZeroDuration();
  auto backend = engine::cuda::CudaBackend::Create(model, options, cuda_options);
  if (!backend.ok()) {
    std::fprintf(stderr, "CudaBackend: %s\n", backend.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(backend);
}

// Median device seconds per batch over the pool, cycled.
double DeviceTime(engine::cuda::CudaBackend& backend, const std::vector<Batch>& pool, int reps) {
  BatchResult result;
  std::vector<double> device;
  for (int i = 0; i < 20 + reps; ++i) {
    const absl::Status st = backend.Run(0, pool[static_cast<size_t>(i) % pool.size()], &result);
    if (!st.ok()) {
      std::fprintf(stderr, "Run: %s\n", st.ToString().c_str());
      std::exit(1);
    }
    if (i >= 20) device.push_back(backend.stats(0).last_device_seconds);
  }
  return Median(device);
}

std::pair<uint64_t, uint64_t> Counts(engine::HotRowManager& manager) {
  auto status = manager.Get({});
  uint64_t hits = 0, misses = 0;
  if (status.ok()) {
    for (const auto& t : status->tables) {
      hits += t.hits;
      misses += t.misses;
    }
  }
  return {hits, misses};
}

}  // namespace

void RunHostTableBenches(std::shared_ptr<const engine::Model> model, int reps) {
  engine::HotRowOptions hot;
  hot.capacity = kHotRows;
  hot.sketches = false;
  auto manager = engine::HotRowManager::Create(model, hot);
  if (!manager.ok()) {
    std::fprintf(stderr, "HotRowManager: %s\n", manager.status().ToString().c_str());
    std::exit(1);
  }
  auto device = Backend(model, nullptr);
  auto host = Backend(model, manager->get());
  for (const double s : {1.05, 1.2}) {
    std::vector<Zipf> laws;
    for (const engine::EmbeddingTable& t : model->tables()) laws.emplace_back(t.rows, s);
    std::mt19937_64 rng(11);
    for (const bool hot_set : {false, true}) {
      // The hottest ranks are rows 0..4095 of each table (row = Zipf rank).
      std::vector<int64_t> ids(hot_set ? kHotRows : 0);
      std::iota(ids.begin(), ids.end(), 0);
      std::vector<engine::TableIds> tables;
      for (const engine::EmbeddingTable& t : model->tables()) tables.push_back({t.name, ids});
      auto set = (*manager)->Set(tables);
      if (!set.ok()) {
        std::fprintf(stderr, "SetHotRows: %s\n", set.status().ToString().c_str());
        std::exit(1);
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (host->hot_cache_version() != set->version &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (host->hot_cache_version() != set->version) {
        // The upload failed or is late: the timings would be of the previous hot set.
        std::fprintf(stderr,
                     "SetHotRows: the device hot-row cache did not reach version %llu within "
                     "10 s (it holds version %llu)\n",
                     static_cast<unsigned long long>(set->version),
                     static_cast<unsigned long long>(host->hot_cache_version()));
        std::exit(1);
      }
      for (uint32_t n : {16u, 256u, 1024u}) {
        std::vector<Batch> pool;
        for (int p = 0; p < kBatchPool; ++p)
          pool.push_back(OneRequestBatch(model, n, rng,
                                         [&](int t, std::mt19937_64& g) { return laws[t](g); }));
        const double on_device = DeviceTime(*device, pool, reps);
        const auto before = Counts(**manager);
        const double on_host = DeviceTime(*host, pool, reps);
        const auto after = Counts(**manager);
        const double hits = static_cast<double>(after.first - before.first);
        const double all = hits + static_cast<double>(after.second - before.second);
        const double hit_rate = all > 0 ? hits / all : 0;
        std::printf(
            "host tables, zipf %.2f, %4u candidates, hot rows %4d: device %7.1f us, device "
            "tables %7.1f us (x%.2f), hit rate %.3f\n",
            s, n, hot_set ? kHotRows : 0, on_host * 1e6, on_device * 1e6, on_host / on_device,
            hit_rate);
        JsonLine("host_tables")
            .Add("zipf", s)
            .Add("candidates", n)
            .Add("hot_rows", hot_set ? kHotRows : 0)
            .Add("device_us", on_host * 1e6)
            .Add("device_tables_us", on_device * 1e6)
            .Add("hit_rate", hit_rate)
            .Print();
      }
    }
  }
}

}  // namespace fuserank::bench
