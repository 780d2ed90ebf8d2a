// An experiment the server does not use: the seed's shared-memory staging of hot rows
// (the idea behind `cache.shared_memory_rows`), so that fuserank-gpu-bench can measure it
// against the plain lookup, which leaves hot rows to the L2. Every block first copies
// the `staged_rows` hottest rows of each table, with their row -> slot index
// (kernels/hot_cache.h's open addressing and hash), into shared memory, then pools its
// bags, reading a row from shared memory when the index holds it and from the table
// otherwise. The pooled values have the bits of LaunchPooledLookup's (the same adds in id
// order). Preconditions, which nothing checks on the device: fp32 rows read as 16-byte
// vectors (LookupTable::vector) in every table; only item bags are pooled (a batch's user
// bags and dense rows are left alone), straight from the tables (no id reorder).
// Launchers compile with the host compiler; the caller owns every buffer.
#ifndef FUSERANK_KERNELS_SMEM_STAGING_H_
#define FUSERANK_KERNELS_SMEM_STAGING_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/descriptors.h"
#include "kernels/hot_cache.h"

namespace fuserank::kernels {

struct StagedLookupArgs {
  const unsigned char* d_batch = nullptr;  // packed batch: its item bags are pooled
  const LookupTable* d_tables = nullptr;   // item tables, fp32 rows, vector == 1
  int tables = 0;
  // Per table t: index_entries entries at d_index + t * index_entries (a power of two >=
  // 2 x staged_rows; home of a row: (row * kHotHashMultiplier) >> shift), and its
  // staged_rows rows in slot order at d_rows + t * staged_rows * row_bytes.
  const HotCacheEntry* d_index = nullptr;
  const unsigned char* d_rows = nullptr;
  int staged_rows = 0;
  int index_entries = 0;
  int32_t shift = 31;
  uint32_t row_bytes = 0;  // every table's, a multiple of 16
  float* d_out = nullptr;  // row c of [candidates, out_ld], at each table's out_col
  int out_ld = 0;
  uint32_t max_candidates = 0;  // grid bound
  int lanes = 8;                // 4, 8, 16 or 32 (LookupLanes)
  // 0: one lane group per bag, as LaunchPooledLookup sizes its grid; else at most this
  // many blocks, each pooling many bags (a grid-stride loop) for its one staging.
  uint32_t max_blocks = 0;
};

// Dynamic shared memory one block of this launch needs.
size_t StagedLookupSharedBytes(const StagedLookupArgs& args);

// Lets the kernel use `bytes` of dynamic shared memory per block on the current device
// (above 48 KiB needs the opt-in). Call before a launch that needs more than 48 KiB.
cudaError_t AllowStagedLookupSharedBytes(size_t bytes);

// Blocks of this launch one SM holds at once (its shared memory and threads allow), or 0
// on an error (after AllowStagedLookupSharedBytes where it needs more than 48 KiB).
int StagedLookupBlocksPerSm(const StagedLookupArgs& args);

// max_candidates == 0 or tables == 0: returns at once.
cudaError_t LaunchStagedLookup(const StagedLookupArgs& args, cudaStream_t stream);

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_SMEM_STAGING_H_
