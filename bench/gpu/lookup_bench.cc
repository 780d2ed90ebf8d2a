#include "bench/gpu/lookup_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/batch.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/device_memory.h"
#include "kernels/layout_math.h"
#include "kernels/lookup.h"

namespace fuserank::bench {
namespace {

using engine::Batch;
using engine::cuda::BatchPacker;
using engine::cuda::DeviceBuffer;
using engine::cuda::PackInfo;

constexpr int kTables = 18;
constexpr int kRows = 200000;
constexpr int kDim = 32;  // fp32: 128-byte rows
constexpr uint32_t kRowBytes = kDim * 4;

DeviceBuffer MustAllocate(size_t bytes, const char* what) {
  auto b = DeviceBuffer::Allocate(bytes, what);
  if (!b.ok()) {
    std::fprintf(stderr, "%s\n", b.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(b);
}

// Zipf(s) over [0, n) by inverse CDF, ranks scattered over the rows.
class Zipf {
 public:
  Zipf(int n, double s) : cdf_(n) {
    double sum = 0;
    for (int k = 0; k < n; ++k) cdf_[k] = (sum += 1.0 / std::pow(k + 1.0, s));
    for (double& c : cdf_) c /= sum;
  }
  int32_t operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
    const uint64_t rank = static_cast<uint64_t>(it - cdf_.begin());
    return static_cast<int32_t>((rank * 2654435761ull) % cdf_.size());
  }

 private:
  std::vector<double> cdf_;
};

struct Config {
  uint32_t candidates;
  int bag;
  bool zipf;
  bool reorder;
};

void RunOne(DeviceTimer& timer, const DeviceBuffer& desc, const Config& cfg, double copy_gbps) {
  std::mt19937_64 rng(42);
  const Zipf zipf(kRows, 1.05);
  Batch batch;
  batch.candidate_begin = {0, cfg.candidates};
  batch.top_k = {cfg.candidates};
  const uint64_t bags = uint64_t{cfg.candidates} * kTables;
  batch.item.bag_begin.reserve(bags + 1);
  for (uint64_t b = 0; b < bags; ++b) {
    for (int j = 0; j < cfg.bag; ++j) {
      batch.item.rows.push_back(cfg.zipf ? zipf(rng) : static_cast<int32_t>(rng() % kRows));
      batch.item.weights.push_back(1.0f);
    }
    batch.item.bag_begin.push_back(static_cast<uint32_t>(batch.item.rows.size()));
  }
  PackInfo info;
  info.item_rows.assign(kTables, kRows);
  BatchPacker packer(info, cfg.reorder);
  auto h = packer.Plan(batch);
  if (!h.ok()) {
    std::fprintf(stderr, "%s\n", h.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<unsigned char> packed(h->total_bytes);
  packer.Write(batch, *h, packed.data());
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
  DeviceBuffer d_batch = MustAllocate(packed.size(), "batch");
  Check(cudaMemcpy(d_batch.get(), packed.data(), packed.size(), cudaMemcpyHostToDevice), "copy");
  Check(cudaDeviceSynchronize(), "copy");  // the timer's stream does not wait for it
  const int ld = kTables * kDim;
  DeviceBuffer out = MustAllocate(size_t{cfg.candidates} * ld * 4, "output");
  DeviceBuffer gathered;
  if (cfg.reorder) gathered = MustAllocate(size_t{h->num_unique} * kRowBytes + 16, "gathered");

  kernels::LookupArgs a;
  a.d_batch = d_batch.get<unsigned char>();
  a.d_tables = desc.get<kernels::LookupTable>();
  a.item_tables = kTables;
  a.d_item_out = out.get<float>();
  a.item_ld = ld;
  a.max_candidates = cfg.candidates;
  a.max_requests = 1;
  a.lanes = kernels::LookupLanes(kernels::RowUnits(kDim, 4));
  a.row_type = kernels::RowType::kF32;
  kernels::GatherArgs ga;
  if (cfg.reorder) {
    a.d_gathered = gathered.get<unsigned char>();
    a.gather_stride = kRowBytes;
    ga.d_batch = a.d_batch;
    ga.d_tables = a.d_tables;
    ga.d_gathered = gathered.get<unsigned char>();
    ga.stride = kRowBytes;
    ga.max_unique = h->num_unique;
  }
  const double t = timer.Time(
      [&](cudaStream_t s) {
        if (cfg.reorder) Check(kernels::LaunchGatherUniqueRows(ga, s), "gather");
        Check(kernels::LaunchPooledLookup(a, s), "lookup");
      },
      20);
  const double lookups = static_cast<double>(batch.item.rows.size());
  // Rows read and their indices, bag offsets read, pooled vectors written.
  const double bytes = lookups * (kRowBytes + 4) + bags * (4.0 + kRowBytes);
  const double gbps = bytes / t / 1e9;
  std::printf(
      "lookup %8.0f lookups bag %d %-7s reorder %d: %8.1f us %7.0f GB/s (%3.0f%% of copy);"
      " host pack %8.1f us, device + host %8.1f us\n",
      lookups, cfg.bag, cfg.zipf ? "zipf" : "uniform", cfg.reorder ? 1 : 0, t * 1e6, gbps,
      100 * gbps / copy_gbps, host_pack * 1e6, (t + host_pack) * 1e6);
  JsonLine("lookup")
      .Add("lookups", lookups)
      .Add("bag", cfg.bag)
      .Add("ids", cfg.zipf ? "zipf" : "uniform")
      .Add("reorder", cfg.reorder ? 1 : 0)
      .Add("unique", h->num_unique)
      .Add("us", t * 1e6)
      .Add("gbps", gbps)
      .Add("pct_of_copy", 100 * gbps / copy_gbps)
      .Add("host_pack_us", host_pack * 1e6)
      .Add("us_with_host_pack", (t + host_pack) * 1e6)
      .Print();
}

}  // namespace

void RunLookupBenches(DeviceTimer& timer, double copy_gbps) {
  std::vector<DeviceBuffer> tables;
  std::vector<kernels::LookupTable> desc(kTables);
  for (int t = 0; t < kTables; ++t) {
    tables.push_back(MustAllocate(size_t{kRows} * kRowBytes, "table"));
    desc[t].d_rows = tables.back().get<unsigned char>();
    desc[t].row_bytes = kRowBytes;
    desc[t].dim = kDim;
    desc[t].vector = 1;
    desc[t].out_col = t * kDim;
  }
  DeviceBuffer d_desc = MustAllocate(desc.size() * sizeof(desc[0]), "descriptors");
  Check(
      cudaMemcpy(d_desc.get(), desc.data(), desc.size() * sizeof(desc[0]), cudaMemcpyHostToDevice),
      "copy descriptors");
  Check(cudaDeviceSynchronize(), "copy descriptors");
  const Config configs[] = {
      {4096, 1, false, false}, {16384, 1, false, false}, {65536, 1, false, false},
      {8192, 8, false, false}, {16384, 1, true, false},  {16384, 1, true, true},
      {8192, 8, true, false},  {8192, 8, true, true},
  };
  for (const Config& c : configs) RunOne(timer, d_desc, c, copy_gbps);
}

}  // namespace fuserank::bench
