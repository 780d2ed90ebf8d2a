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

// Rows of the hottest ranks of every table, [table][rank].
using HotRows = std::vector<std::vector<std::vector<float>>>;

// Writes rows[t][r], r < count, over the table rows of rank r.
void WriteHotRows(const TableSet& set, const Format& f, const HotRows& rows, int count) {
  for (int t = 0; t < kBenchTables; ++t) {
    for (int r = 0; r < count; ++r) {
      unsigned char* dst = set.tables[t].get<unsigned char>() +
                           static_cast<size_t>(ScatteredRow(r, kBenchRows)) * f.row_bytes;
      Check(cudaMemcpy(dst, rows[t][r].data(), f.row_bytes, cudaMemcpyHostToDevice),
            "write hot row");
    }
  }
}

// Distinct values in the kMaxStaged hottest rows of every table (the fill pattern elsewhere),
// so that a row read from the wrong slot changes the output. Returns them.
HotRows MarkHotRows(const TableSet& set, const Format& f) {
  HotRows hot(kBenchTables);
  for (int t = 0; t < kBenchTables; ++t) {
    for (int r = 0; r < kMaxStaged; ++r) {
      std::vector<float> row(static_cast<size_t>(f.dim));
      for (int e = 0; e < f.dim; ++e) row[e] = 0.001f * static_cast<float>(t * 4096 + r * 64 + e);
      hot[t].push_back(std::move(row));
    }
  }
  WriteHotRows(set, f, hot, kMaxStaged);
  return hot;
}

// The same rows negated (exact): staged in place of the table's, they tell a lookup that
// reads the staging from one that reads the table.
HotRows Negated(HotRows rows) {
  for (auto& table : rows) {
    for (auto& row : table) {
      for (float& v : row) v = -v;
    }
  }
  return rows;
}

// The staged index and rows of the `staged` hottest rows of every table.
struct Staging {
  DeviceBuffer d_index;
  DeviceBuffer d_rows;
  int entries = 0;
  int32_t shift = 31;
};

Staging MakeStaging(const HotRows& hot, const Format& f, int staged) {
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

// One request of n candidates over the bench tables, its bags drawn by `bag`, packed into
// device memory.
template <typename Bag>
DeviceBuffer PackBatch(uint32_t n, const Bag& bag) {
  engine::Batch batch;
  batch.candidate_begin = {0, n};
  batch.top_k = {n};
  for (uint64_t b = 0; b < uint64_t{n} * kBenchTables; ++b) {
    bag(&batch.item);
    batch.item.bag_begin.push_back(static_cast<uint32_t>(batch.item.rows.size()));
  }
  engine::cuda::BatchPacker packer(BenchPackInfo(), /*reorder_ids=*/false);
  kernels::PackedHeader header;
  return MustUpload(MustPack(packer, batch, &header));
}

// A pool of one-request batches of n candidates, one Zipf(s) id per bag (weight 1), and the
// share of ids among the 16 and the 64 hottest rows of their table.
struct Pool {
  std::vector<DeviceBuffer> batches;
  double hit16 = 0;
  double hit64 = 0;
};

Pool MakePool(uint32_t n, double s) {
  Pool pool;
  const Zipf zipf(kBenchRows, s);
  std::mt19937_64 rng(7);
  uint64_t ids = 0, in16 = 0, in64 = 0;
  for (int p = 0; p < kPool; ++p) {
    pool.batches.push_back(PackBatch(n, [&](engine::BagSet* bags) {
      const int32_t rank = zipf(rng);
      in16 += rank < 16 ? 1 : 0;
      in64 += rank < 64 ? 1 : 0;
      ++ids;
      bags->rows.push_back(ScatteredRow(rank, kBenchRows));
      bags->weights.push_back(1.0f);
    }));
  }
  pool.hit16 = static_cast<double>(in16) / static_cast<double>(ids);
  pool.hit64 = static_cast<double>(in64) / static_cast<double>(ids);
  return pool;
}

// The pooled output of `batch` after `launch`, as bytes (the output poisoned first).
template <typename Launch>
std::vector<unsigned char> Output(const DeviceBuffer& batch, const DeviceBuffer& out, size_t bytes,
                                  const Launch& launch) {
  Check(cudaMemset(out.get(), 0xff, bytes), "poison output");
  Check(launch(batch.get<unsigned char>(), cudaStream_t{}), "launch");
  Check(cudaDeviceSynchronize(), "sync");
  std::vector<unsigned char> host(bytes);
  Check(cudaMemcpy(host.data(), out.get(), bytes, cudaMemcpyDeviceToHost), "copy output");
  return host;
}

kernels::LookupArgs PlainArgs(const Format& f, const kernels::LookupTable* desc, float* out,
                              uint32_t n) {
  kernels::LookupArgs a;
  a.d_tables = desc;
  a.item_tables = kBenchTables;
  a.d_item_out = out;
  a.item_ld = kBenchTables * f.dim;
  a.max_candidates = n;
  a.max_requests = 1;
  a.lanes = f.lanes;
  a.row_type = f.type;
  a.prefetch_ids = false;
  return a;
}

kernels::StagedLookupArgs StagedArgs(const Format& f, const Staging& st, int staged,
                                     const kernels::LookupTable* desc, float* out, uint32_t n) {
  kernels::StagedLookupArgs a;
  a.d_tables = desc;
  a.tables = kBenchTables;
  a.d_index = st.d_index.get<kernels::HotCacheEntry>();
  a.d_rows = st.d_rows.get<unsigned char>();
  a.staged_rows = staged;
  a.index_entries = st.entries;
  a.shift = st.shift;
  a.row_bytes = f.row_bytes;
  a.d_out = out;
  a.out_ld = kBenchTables * f.dim;
  a.max_candidates = n;
  a.lanes = f.lanes;
  return a;
}

// The grids the staged lookup runs with, (max_blocks, name): the product's (a lane group per
// bag), every block the SMs hold at once, one block per SM. Raises the kernel's shared
// memory limit first; empty when the staging does not fit in a block's shared memory.
std::vector<std::pair<uint32_t, std::string>> Grids(const kernels::StagedLookupArgs& a, int sms,
                                                    size_t max_shared) {
  const size_t shared = kernels::StagedLookupSharedBytes(a);
  if (shared > max_shared) return {};
  Check(kernels::AllowStagedLookupSharedBytes(shared), "shared memory opt-in");
  std::vector<std::pair<uint32_t, std::string>> grids = {{0, "staged, a group per bag"}};
  const int per_sm = kernels::StagedLookupBlocksPerSm(a);
  if (per_sm > 0) grids.emplace_back(per_sm * sms, "staged, blocks = SM slots");
  if (per_sm > 1) grids.emplace_back(sms, "staged, a block per SM");
  return grids;
}

// The bit-for-bit check on what the timed batches leave out: bags of 0-9 ids (some empty),
// weights in [0.5, 1.5], the first two tables mean-pooled; every staging and grid against
// the plain lookup. The staged rows are the tables' hot rows negated, and the reference is
// the plain lookup over tables that hold those negated rows, so a staged lookup that
// never reads its staging (or reads the wrong slot) differs. One line and one JSON line
// ("smem_staging_check") each. Leaves the tables' hot rows as `hot`.
void CheckBits(const Format& f, const TableSet& set, const HotRows& hot,
               const std::vector<int>& staged_rows, int sms, size_t max_shared) {
  std::vector<kernels::LookupTable> desc(kBenchTables);
  Check(cudaMemcpy(desc.data(), set.d_desc.get(), desc.size() * sizeof(desc[0]),
                   cudaMemcpyDeviceToHost),
        "copy descriptors");
  desc[0].mean = 1;
  desc[1].mean = 1;
  const DeviceBuffer d_desc = MustAllocate(desc.size() * sizeof(desc[0]), "descriptors");
  Check(
      cudaMemcpy(d_desc.get(), desc.data(), desc.size() * sizeof(desc[0]), cudaMemcpyHostToDevice),
      "copy descriptors");
  constexpr uint32_t kN = 256;
  const Zipf zipf(kBenchRows, 1.05);
  std::mt19937_64 rng(13);
  const DeviceBuffer batch = PackBatch(kN, [&](engine::BagSet* bags) {
    const int ids = static_cast<int>(rng() % 10);
    for (int i = 0; i < ids; ++i) {
      bags->rows.push_back(ScatteredRow(zipf(rng), kBenchRows));
      bags->weights.push_back(std::uniform_real_distribution<float>(0.5f, 1.5f)(rng));
    }
  });
  const size_t bytes = size_t{kN} * kBenchTables * f.dim * sizeof(float);
  const DeviceBuffer out = MustAllocate(bytes, "output");
  const kernels::LookupArgs plain =
      PlainArgs(f, d_desc.get<kernels::LookupTable>(), out.get<float>(), kN);
  const HotRows negated = Negated(hot);
  for (size_t i = 0; i < staged_rows.size(); ++i) {
    const Staging staging = MakeStaging(negated, f, staged_rows[i]);
    WriteHotRows(set, f, negated, staged_rows[i]);
    const auto reference = Output(batch, out, bytes, [&](const unsigned char* b, cudaStream_t st) {
      kernels::LookupArgs a = plain;
      a.d_batch = b;
      return kernels::LaunchPooledLookup(a, st);
    });
    WriteHotRows(set, f, hot, staged_rows[i]);  // the tables as the timings read them
    const kernels::StagedLookupArgs sa = StagedArgs(
        f, staging, staged_rows[i], d_desc.get<kernels::LookupTable>(), out.get<float>(), kN);
    for (const auto& [max_blocks, variant] : Grids(sa, sms, max_shared)) {
      const bool same = Output(batch, out, bytes, [&](const unsigned char* b, cudaStream_t st) {
                          kernels::StagedLookupArgs a = sa;
                          a.d_batch = b;
                          a.max_blocks = max_blocks;
                          return kernels::LaunchStagedLookup(a, st);
                        }) == reference;
      std::printf(
          "smem staging check, bags of 0-9 weighted ids, mean and sum, staged rows negated, "
          "%-24s staged %2d: %s\n",
          variant.c_str(), staged_rows[i], same ? "same bits" : "BITS DIFFER");
      JsonLine("smem_staging_check")
          .Add("variant", variant)
          .Add("staged", staged_rows[i])
          .Add("same_bits", same ? 1 : 0)
          .Print();
    }
  }
}

}  // namespace

void RunSmemStagingBenches(DeviceTimer& timer, int sms) {
  const Format f = MakeFormat(engine::DType::kF32, 32);
  if (f.type != kernels::RowType::kF32 || !f.vector) {  // kernels/smem_staging.h's preconditions
    std::fprintf(stderr, "smem staging: the bench tables are not fp32 vector rows\n");
    std::exit(1);
  }
  const TableSet set = MakeTables(f);
  const auto hot = MarkHotRows(set, f);
  int optin = 0;
  Check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
        "shared memory limit");
  const size_t max_shared = static_cast<size_t>(optin);
  const std::vector<int> staged_rows = {16, kMaxStaged};
  CheckBits(f, set, hot, staged_rows, sms, max_shared);
  std::vector<Staging> stagings;
  for (int staged : staged_rows) stagings.push_back(MakeStaging(hot, f, staged));
  const auto* desc = set.d_desc.get<kernels::LookupTable>();
  for (const double s : {1.05, 1.2}) {
    for (const uint32_t n : {256u, 1024u, 8192u}) {
      const Pool pool = MakePool(n, s);
      const size_t out_bytes = size_t{n} * kBenchTables * f.dim * sizeof(float);
      const DeviceBuffer out = MustAllocate(out_bytes, "output");
      const kernels::LookupArgs plain = PlainArgs(f, desc, out.get<float>(), n);
      auto launch_plain = [&](const unsigned char* batch, cudaStream_t st) {
        kernels::LookupArgs a = plain;
        a.d_batch = batch;
        return kernels::LaunchPooledLookup(a, st);
      };
      const auto reference = Output(pool.batches[0], out, out_bytes, launch_plain);
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
        const bool same = Output(pool.batches[0], out, out_bytes, launch) == reference;
        report("plain, id prefetch", 0, 0, 0, time(launch), same);
      }
      for (size_t i = 0; i < stagings.size(); ++i) {
        const int staged = staged_rows[i];
        const kernels::StagedLookupArgs sa =
            StagedArgs(f, stagings[i], staged, desc, out.get<float>(), n);
        const auto grids = Grids(sa, sms, max_shared);
        if (grids.empty()) {
          std::printf(
              "smem staging, %d rows a table: skipped (%zu bytes of shared memory a "
              "block, the device allows %zu)\n",
              staged, kernels::StagedLookupSharedBytes(sa), max_shared);
        }
        for (const auto& [max_blocks, variant] : grids) {
          auto launch = [&](const unsigned char* batch, cudaStream_t stream) {
            kernels::StagedLookupArgs a = sa;
            a.d_batch = batch;
            a.max_blocks = max_blocks;
            return kernels::LaunchStagedLookup(a, stream);
          };
          const bool same = Output(pool.batches[0], out, out_bytes, launch) == reference;
          report(variant, staged, max_blocks, staged == 16 ? pool.hit16 : pool.hit64, time(launch),
                 same);
        }
      }
    }
  }
}

}  // namespace fuserank::bench
