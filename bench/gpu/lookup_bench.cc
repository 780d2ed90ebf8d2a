#include "bench/gpu/lookup_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu/bench_tables.h"
#include "bench/gpu/zipf.h"
#include "engine/batch.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/device_memory.h"
#include "kernels/lookup.h"

namespace fuserank::bench {
namespace {

using engine::Batch;
using engine::cuda::BatchPacker;
using engine::cuda::DeviceBuffer;

struct Config {
  uint32_t candidates;
  int bag;
  bool zipf;
  bool reorder;
};

void RunOne(DeviceTimer& timer, const Format& f, const DeviceBuffer& desc, const Config& cfg,
            bool prefetch, double copy_gbps) {
  std::mt19937_64 rng(42);
  const Zipf zipf(kBenchRows, 1.05);
  Batch batch;
  batch.candidate_begin = {0, cfg.candidates};
  batch.top_k = {cfg.candidates};
  const uint64_t bags = uint64_t{cfg.candidates} * kBenchTables;
  batch.item.bag_begin.reserve(bags + 1);
  for (uint64_t b = 0; b < bags; ++b) {
    for (int j = 0; j < cfg.bag; ++j) {
      batch.item.rows.push_back(cfg.zipf ? ScatteredRow(zipf(rng), kBenchRows)
                                         : static_cast<int32_t>(rng() % kBenchRows));
      batch.item.weights.push_back(1.0f);
    }
    batch.item.bag_begin.push_back(static_cast<uint32_t>(batch.item.rows.size()));
  }
  BatchPacker packer(BenchPackInfo(), cfg.reorder);
  kernels::PackedHeader h;
  std::vector<unsigned char> packed = MustPack(packer, batch, &h);
  // The host's share of a lookup: planning and writing the packed batch, which with id
  // reorder includes the sort and dedup of every (table, row). Median of 9.
  std::vector<double> host_times;
  for (int i = 0; i < 9; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto plan = packer.Plan(batch);
    if (plan.ok()) packer.Write(batch, *plan, packed.data());
    host_times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(host_times.begin(), host_times.end());
  const double host_pack = host_times[host_times.size() / 2];
  const DeviceBuffer d_batch = MustUpload(packed);
  const int ld = kBenchTables * f.dim;
  DeviceBuffer out = MustAllocate(size_t{cfg.candidates} * ld * 4, "output");
  DeviceBuffer gathered;
  if (cfg.reorder) gathered = MustAllocate(size_t{h.num_unique} * f.row_bytes + 16, "gathered");

  kernels::LookupArgs a;
  a.d_batch = d_batch.get<unsigned char>();
  a.d_tables = desc.get<kernels::LookupTable>();
  a.item_tables = kBenchTables;
  a.d_item_out = out.get<float>();
  a.item_ld = ld;
  a.max_candidates = cfg.candidates;
  a.max_requests = 1;
  a.lanes = f.lanes;
  a.row_type = f.type;
  a.prefetch_ids = prefetch;
  kernels::GatherArgs ga;
  if (cfg.reorder) {
    a.d_gathered = gathered.get<unsigned char>();
    a.gather_stride = f.row_bytes;
    ga.d_batch = a.d_batch;
    ga.d_tables = a.d_tables;
    ga.d_gathered = gathered.get<unsigned char>();
    ga.stride = f.row_bytes;
    ga.max_unique = h.num_unique;
  }
  const double t = timer.Time(
      [&](cudaStream_t s) {
        if (cfg.reorder) Check(kernels::LaunchGatherUniqueRows(ga, s), "gather");
        Check(kernels::LaunchPooledLookup(a, s), "lookup");
      },
      20);
  const double lookups = static_cast<double>(batch.item.rows.size());
  // Rows read and their indices, bag offsets read, pooled vectors written.
  const double bytes = lookups * (f.read_bytes + 4) + bags * (4.0 + f.dim * 4.0);
  const double gbps = bytes / t / 1e9;
  std::printf(
      "lookup %s dim %3d %8.0f lookups bag %d %-7s reorder %d prefetch %d: %8.1f us %7.0f GB/s"
      " (%3.0f%% of copy); host pack %8.1f us, device + host %8.1f us\n",
      f.name.c_str(), f.dim, lookups, cfg.bag, cfg.zipf ? "zipf" : "uniform", cfg.reorder ? 1 : 0,
      prefetch ? 1 : 0, t * 1e6, gbps, 100 * gbps / copy_gbps, host_pack * 1e6,
      (t + host_pack) * 1e6);
  JsonLine("lookup")
      .Add("dtype", f.name)
      .Add("dim", f.dim)
      .Add("prefetch", prefetch ? 1 : 0)
      .Add("lookups", lookups)
      .Add("bag", cfg.bag)
      .Add("ids", cfg.zipf ? "zipf" : "uniform")
      .Add("reorder", cfg.reorder ? 1 : 0)
      .Add("unique", h.num_unique)
      .Add("us", t * 1e6)
      .Add("gbps", gbps)
      .Add("pct_of_copy", 100 * gbps / copy_gbps)
      .Add("host_pack_us", host_pack * 1e6)
      .Add("us_with_host_pack", (t + host_pack) * 1e6)
      .Print();
}

}  // namespace

void RunLookupBenches(DeviceTimer& timer, double copy_gbps) {
  // fp32 dim 32 (128-byte rows, the bench model's): every shape. Each shape with and
  // without the id prefetch, side by side.
  const Format f32 = MakeFormat(engine::DType::kF32, 32);
  {
    const TableSet set = MakeTables(f32);
    const Config configs[] = {
        {4096, 1, false, false}, {16384, 1, false, false}, {65536, 1, false, false},
        {8192, 8, false, false}, {16384, 1, true, false},  {16384, 1, true, true},
        {8192, 8, true, false},  {8192, 8, true, true},
    };
    for (const Config& c : configs) {
      for (bool prefetch : {false, true}) RunOne(timer, f32, set.d_desc, c, prefetch, copy_gbps);
    }
  }
  // The other formats the target names: fp32 dim 128, fp16 and int8 rows, one-hot and 8-id
  // bags of uniform ids, 295k lookups or more.
  for (const Format& f :
       {MakeFormat(engine::DType::kF32, 128), MakeFormat(engine::DType::kF16, 32),
        MakeFormat(engine::DType::kF16, 128), MakeFormat(engine::DType::kInt8, 32),
        MakeFormat(engine::DType::kInt8, 128)}) {
    const TableSet set = MakeTables(f);
    for (const Config& c : {Config{16384, 1, false, false}, Config{8192, 8, false, false}}) {
      for (bool prefetch : {false, true}) RunOne(timer, f, set.d_desc, c, prefetch, copy_gbps);
    }
  }
}

}  // namespace fuserank::bench
