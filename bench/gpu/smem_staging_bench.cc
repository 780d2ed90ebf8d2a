#include "bench/gpu/smem_staging_bench.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/gpu/bench_tables.h"
#include "bench/gpu/zipf.h"
#include "engine/batch.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/device_memory.h"
#include "kernels/hot_cache.h"
#include "kernels/lookup.h"
#include "kernels/smem_staging.h"

namespace fuserank::bench {
namespace {

using engine::cuda::DeviceBuffer;

constexpr int kPool = 8;
constexpr int kMaxStaged = 64;
constexpr int kReps = 24;
constexpr int kWarmup = 8;

// Distinct values in the kMaxStaged hottest rows of every table (the fill pattern elsewhere),
// so that a row read from the wrong slot changes the output. Returns them, [table][rank].
std::vector<std::vector<std::vector<float>>> MarkHotRows(const TableSet& set, const Format& f) {
  std::vector<std::vector<std::vector<float>>> hot(kBenchTables);
  for (int t = 0; t < kBenchTables; ++t) {
    for (int r = 0; r < kMaxStaged; ++r) {
      std::vector<float> row(static_cast<size_t>(f.dim));
      for (int e = 0; e < f.dim; ++e) row[e] = 0.001f * static_cast<float>(t * 4096 + r * 64 + e);
      unsigned char* dst = set.tables[t].get<unsigned char>() +
                           static_cast<size_t>(ScatteredRow(r, kBenchRows)) * f.row_bytes;
      Check(cudaMemcpy(dst, row.data(), f.row_bytes, cudaMemcpyHostToDevice), "mark hot row");
      hot[t].push_back(std::move(row));
    }
  }
  return hot;
}

// The staged index and rows of the `staged` hottest rows of every table.
struct Staging {
  DeviceBuffer d_index;
  DeviceBuffer d_rows;
  int entries = 0;
  int32_t shift = 31;
};

Staging MakeStaging(const std::vector<std::vector<std::vector<float>>>& hot, const Format& f,
                    int staged) {
  Staging s;
  int log2 = 1;
  while ((1 << log2) < 2 * staged) ++log2;
  s.entries = 1 << log2;
  s.shift = 32 - log2;
  std::vector<kernels::HotCacheEntry> index(static_cast<size_t>(kBenchTables) * s.entries,
                                            kernels::HotCacheEntry{kernels::kHotEmpty, 0});
  std::vector<unsigned char> rows(static_cast<size_t>(kBenchTables) * staged * f.row_bytes);
  for (int t = 0; t < kBenchTables; ++t) {
    kernels::HotCacheEntry* table_index = index.data() + static_cast<size_t>(t) * s.entries;
    for (int r = 0; r < staged; ++r) {
      const int32_t row = ScatteredRow(r, kBenchRows);
      uint32_t i = (static_cast<uint32_t>(row) * kernels::kHotHashMultiplier) >> s.shift;
      while (table_index[i].row != kernels::kHotEmpty) i = (i + 1) & (s.entries - 1);
      table_index[i] = kernels::HotCacheEntry{row, r};
      std::memcpy(rows.data() + (static_cast<size_t>(t) * staged + r) * f.row_bytes,
                  hot[t][r].data(), f.row_bytes);
    }
  }
  s.d_index = MustAllocate(index.size() * sizeof(index[0]), "staged index");
  s.d_rows = MustAllocate(rows.size() + 16, "staged rows");
  Check(cudaMemcpy(s.d_index.get(), index.data(), index.size() * sizeof(index[0]),
                   cudaMemcpyHostToDevice),
        "copy staged index");
  Check(cudaMemcpy(s.d_rows.get(), rows.data(), rows.size(), cudaMemcpyHostToDevice),
        "copy staged rows");
  return s;
}

// A pool of one-request batches of n candidates, one Zipf(s) id per bag, packed in device
// memory; `hits[k]`: the share of ids among the k hottest of their table, k = 16 and 64.
struct Pool {
  std::vector<DeviceBuffer> batches;
  double hit16 = 0;
  double hit64 = 0;
};

Pool MakePool(uint32_t n, double s) {
  Pool pool;
  const Zipf zipf(kBenchRows, s);
  std::mt19937_64 rng(7);
  engine::cuda::PackInfo info;
  info.item_rows.assign(kBenchTables, kBenchRows);
  engine::cuda::BatchPacker packer(info, /*reorder_ids=*/false);
  uint64_t ids = 0, in16 = 0, in64 = 0;
  for (int p = 0; p < kPool; ++p) {
    engine::Batch batch;
    batch.candidate_begin = {0, n};
    batch.top_k = {n};
    for (uint64_t b = 0; b < uint64_t{n} * kBenchTables; ++b) {
      const int32_t rank = zipf(rng);
      in16 += rank < 16 ? 1 : 0;
      in64 += rank < 64 ? 1 : 0;
      ++ids;
      batch.item.rows.push_back(ScatteredRow(rank, kBenchRows));
      batch.item.weights.push_back(1.0f);
      batch.item.bag_begin.push_back(static_cast<uint32_t>(batch.item.rows.size()));
    }
    auto h = packer.Plan(batch);
    if (!h.ok()) {
      std::fprintf(stderr, "%s\n", h.status().ToString().c_str());
      std::exit(1);
    }
    std::vector<unsigned char> packed(h->total_bytes);
    packer.Write(batch, *h, packed.data());
    pool.batches.push_back(MustAllocate(packed.size(), "batch"));
    Check(
        cudaMemcpy(pool.batches.back().get(), packed.data(), packed.size(), cudaMemcpyHostToDevice),
        "copy batch");
  }
  pool.hit16 = static_cast<double>(in16) / static_cast<double>(ids);
  pool.hit64 = static_cast<double>(in64) / static_cast<double>(ids);
  return pool;
}

// The pooled output of pool batch 0 after `launch`, as bytes.
template <typename Launch>
std::vector<unsigned char> OutputOfFirst(const Pool& pool, const DeviceBuffer& out, size_t bytes,
                                         const Launch& launch) {
  Check(cudaMemset(out.get(), 0xff, bytes), "poison output");
  Check(launch(pool.batches[0].get<unsigned char>(), cudaStream_t{}), "launch");
  Check(cudaDeviceSynchronize(), "sync");
  std::vector<unsigned char> host(bytes);
  Check(cudaMemcpy(host.data(), out.get(), bytes, cudaMemcpyDeviceToHost), "copy output");
  return host;
}

}  // namespace

void RunSmemStagingBenches(DeviceTimer& timer, int sms) {
  const Format f = MakeFormat(engine::DType::kF32, 32);
  const TableSet set = MakeTables(f);
  const auto hot = MarkHotRows(set, f);
  int optin = 0;
  Check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
        "shared memory limit");
  const size_t max_shared = static_cast<size_t>(optin);
  std::vector<Staging> stagings;
  for (int staged : {16, kMaxStaged}) stagings.push_back(MakeStaging(hot, f, staged));
  for (const double s : {1.05, 1.2}) {
    for (const uint32_t n : {256u, 1024u, 8192u}) {
      const Pool pool = MakePool(n, s);
      const int ld = kBenchTables * f.dim;
      const size_t out_bytes = size_t{n} * ld * sizeof(float);
      const DeviceBuffer out = MustAllocate(out_bytes, "output");
      kernels::LookupArgs plain;
      plain.d_tables = set.d_desc.get<kernels::LookupTable>();
      plain.item_tables = kBenchTables;
      plain.d_item_out = out.get<float>();
      plain.item_ld = ld;
      plain.max_candidates = n;
      plain.max_requests = 1;
      plain.lanes = f.lanes;
      plain.row_type = f.type;
      plain.prefetch_ids = false;
      auto launch_plain = [&](const unsigned char* batch, cudaStream_t st) {
        kernels::LookupArgs a = plain;
        a.d_batch = batch;
        return kernels::LaunchPooledLookup(a, st);
      };
      const auto reference = OutputOfFirst(pool, out, out_bytes, launch_plain);
      // Median device seconds of `launch` over the pool, cycled, the L2 kept warm.
      auto time = [&](const auto& launch) {
        int k = 0;
        return timer.Time(
            [&](cudaStream_t st) {
              Check(launch(pool.batches[static_cast<size_t>(k++ % kPool)].get<unsigned char>(), st),
                    "launch");
            },
            kReps, kWarmup, /*flush=*/false);
      };
      const double plain_s = time(launch_plain);
      auto report = [&](const std::string& variant, int staged, uint32_t blocks, double hit,
                        double seconds, bool same) {
        std::printf(
            "smem staging, zipf %.2f, %4u candidates, %-24s staged %2d (hit rate %.3f): %7.1f us"
            " (plain %7.1f us, x%.2f)%s\n",
            s, n, variant.c_str(), staged, hit, seconds * 1e6, plain_s * 1e6, seconds / plain_s,
            same ? "" : "  BITS DIFFER");
        JsonLine("smem_staging")
            .Add("zipf", s)
            .Add("candidates", n)
            .Add("variant", variant)
            .Add("staged", staged)
            .Add("blocks", blocks)
            .Add("hit_rate", hit)
            .Add("us", seconds * 1e6)
            .Add("plain_us", plain_s * 1e6)
            .Add("same_bits", same ? 1 : 0)
            .Print();
      };
      {
        auto launch = [&](const unsigned char* batch, cudaStream_t st) {
          kernels::LookupArgs a = plain;
          a.d_batch = batch;
          a.prefetch_ids = true;
          return kernels::LaunchPooledLookup(a, st);
        };
        const bool same = OutputOfFirst(pool, out, out_bytes, launch) == reference;
        report("plain, id prefetch", 0, 0, 0, time(launch), same);
      }
      for (size_t i = 0; i < stagings.size(); ++i) {
        const Staging& st = stagings[i];
        const int staged = i == 0 ? 16 : kMaxStaged;
        kernels::StagedLookupArgs sa;
        sa.d_tables = plain.d_tables;
        sa.tables = kBenchTables;
        sa.d_index = st.d_index.get<kernels::HotCacheEntry>();
        sa.d_rows = st.d_rows.get<unsigned char>();
        sa.staged_rows = staged;
        sa.index_entries = st.entries;
        sa.shift = st.shift;
        sa.row_bytes = f.row_bytes;
        sa.d_out = out.get<float>();
        sa.out_ld = ld;
        sa.max_candidates = n;
        sa.lanes = f.lanes;
        const size_t shared = kernels::StagedLookupSharedBytes(sa);
        if (shared > max_shared) {
          std::printf(
              "smem staging, %d rows a table: skipped (%zu bytes of shared memory a "
              "block, the device allows %zu)\n",
              staged, shared, max_shared);
          continue;
        }
        Check(kernels::AllowStagedLookupSharedBytes(shared), "shared memory opt-in");
        // The product's grid (max_blocks 0); every block an SM can hold at once; one an SM.
        std::vector<std::pair<uint32_t, std::string>> grids = {{0, "staged, a group per bag"}};
        const int per_sm = kernels::StagedLookupBlocksPerSm(sa);
        if (per_sm > 0) grids.emplace_back(per_sm * sms, "staged, blocks = SM slots");
        if (per_sm > 1) grids.emplace_back(sms, "staged, a block per SM");
        for (const auto& [max_blocks, variant] : grids) {
          auto launch = [&](const unsigned char* batch, cudaStream_t stream) {
            kernels::StagedLookupArgs a = sa;
            a.d_batch = batch;
            a.max_blocks = max_blocks;
            return kernels::LaunchStagedLookup(a, stream);
          };
          const bool same = OutputOfFirst(pool, out, out_bytes, launch) == reference;
          report(variant, staged, max_blocks, staged == 16 ? pool.hit16 : pool.hit64, time(launch),
                 same);
        }
      }
    }
  }
}

}  // namespace fuserank::bench
