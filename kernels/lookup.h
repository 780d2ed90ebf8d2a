// Fused multi-table pooled EmbeddingBag: every bag of a packed batch (all tables, user
// and item side) and the dense-input rows in ONE launch, plus the optional gather pass of
// the id-reorder mode. Launchers compile with the host compiler; the caller owns every
// buffer. Thread-safe: launchers hold no state.
#ifndef FUSERANK_KERNELS_LOOKUP_H_
#define FUSERANK_KERNELS_LOOKUP_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/descriptors.h"
#include "kernels/hot_cache.h"

namespace fuserank::kernels {

struct LookupArgs {
  const unsigned char* d_batch = nullptr;  // packed batch, PackedHeader first
  const LookupTable* d_tables = nullptr;   // user tables, then item tables
  int user_tables = 0;
  int item_tables = 0;
  // Pooled user bags: row r of [requests, user_ld]; item bags: row c of [candidates,
  // item_ld], at each table's out_col.
  float* d_user_out = nullptr;
  int user_ld = 0;
  float* d_item_out = nullptr;
  int item_ld = 0;
  // Dense input rows user_dense[r] ++ item_dense[c] at row c of [candidates, dense_ld];
  // nullptr when the model has no dense features.
  float* d_dense_out = nullptr;
  int dense_ld = 0;
  int dense_user = 0;
  int dense_item = 0;
  // Id-reorder mode: rows sections hold slots of the unique list and row data is read
  // from d_gathered (slot * gather_stride) instead of the tables.
  const unsigned char* d_gathered = nullptr;
  uint32_t gather_stride = 0;
  // The largest batch this launch must cover (the grid is sized for it; the kernel reads
  // the real counts from the header): candidates and requests of the size bucket.
  uint32_t max_candidates = 0;
  uint32_t max_requests = 0;
  int lanes = 8;  // LookupLanes(): 4, 8, 16 or 32
  // true: a lane group reads the bag bounds and ids of up to 8 consecutive bags at once, one
  // bag per lane, and issues the rows of those that hold at most one id before adding any
  // (more loads in flight for one-hot features); false: one bag after another. The same
  // scores to the bit either way.
  bool prefetch_ids = true;
  // The row type of every table (a model has one embedding dtype): the kernel is compiled
  // once per type, so no branch on the type runs per bag or per row.
  RowType row_type = RowType::kF32;
  // cache.placement: host: each table's HBM hot-row cache (user tables, then item tables,
  // as d_tables), whose rows are read from there; every other row from the table's d_rows
  // (mapped host memory). nullptr: no cache. Not with d_gathered or prefetch_ids.
  const HotCacheTable* d_hot = nullptr;
  // With d_hot: two counters per table (d_tables order), the ids read from its cache and
  // the others; the launch adds the batch's to them. At most kMaxHotCountedTables tables.
  unsigned long long* d_hot_counts = nullptr;
};

// The most tables a launch with a hot-row cache counts (its blocks keep the counts in
// shared memory, 8 bytes per table).
inline constexpr int kMaxHotCountedTables = 2048;

// Pools every bag and writes the dense rows. max_candidates == 0: returns at once.
cudaError_t LaunchPooledLookup(const LookupArgs& args, cudaStream_t stream);

struct GatherArgs {
  const unsigned char* d_batch = nullptr;  // its unique_rows section is read
  const LookupTable* d_tables = nullptr;   // combined list, as in LookupArgs
  unsigned char* d_gathered = nullptr;     // num_unique x stride bytes
  uint32_t stride = 0;                     // multiple of 16, >= every row_bytes
  uint32_t max_unique = 0;                 // grid bound
};

// Id-reorder pass: copies each unique (table, row) once, in sorted order, into
// d_gathered (a device row as the tables hold it: int8 rows with their scale and bias).
// max_unique == 0: returns at once.
cudaError_t LaunchGatherUniqueRows(const GatherArgs& args, cudaStream_t stream);

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_LOOKUP_H_
