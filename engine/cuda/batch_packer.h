// Packs an engine Batch into the one buffer the GPU reads (kernels/batch_layout.h):
// computes per-request result offsets, and, in the
// id-reorder mode, deduplicates (table, row) pairs into a sorted unique list. Plain C++
// (no CUDA), so it is unit-tested without a GPU. One packer per worker: not thread-safe;
// its scratch vectors keep their capacity, so a warm packer does not allocate.
#ifndef FUSERANK_ENGINE_CUDA_BATCH_PACKER_H_
#define FUSERANK_ENGINE_CUDA_BATCH_PACKER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/batch.h"
#include "engine/model.h"
#include "kernels/batch_layout.h"

namespace fuserank::engine::cuda {

// What the packer needs to know of the model.
struct PackInfo {
  uint32_t dense_user = 0;
  uint32_t dense_item = 0;
  std::vector<int64_t> user_rows;  // rows of each user table, user-table order
  std::vector<int64_t> item_rows;  // rows of each item table
  // Whether each user (item) table pools by the mean; empty: none does.
  std::vector<bool> user_mean;
  std::vector<bool> item_mean;
};

PackInfo MakePackInfo(const Model& model);

class BatchPacker {
 public:
  BatchPacker(PackInfo info, bool reorder_ids) : info_(std::move(info)), reorder_(reorder_ids) {}

  // Computes the layout of `batch`, or INVALID_ARGUMENT when it is too large for the
  // packed layout's 32-bit offsets. REQUIRES: the batch passed ValidateBatch()
  // (engine/batch_validation.h), which guarantees every row in range (a bad row would
  // fault the device); only its sizes are checked again, and aborts when they disagree.
  absl::StatusOr<kernels::PackedHeader> Plan(const Batch& batch);

  // Writes the batch last passed to Plan() into `dst` (header.total_bytes bytes). A
  // mean-pooled bag whose weights add up to exactly 0 (in double, as the CPU engine adds
  // them) gets zero weights, so the kernels' float sum is 0 too and the bag pools to the
  // zero vector (SPEC section 2) instead of being divided by float's rounding residue.
  void Write(const Batch& batch, const kernels::PackedHeader& h, void* dst) const;

  // Per request r of the batch last planned: its results are [r] .. [r + 1).
  const std::vector<uint32_t>& result_begin() const { return result_begin_; }
  // Reorder mode: the unique rows of the batch last planned.
  const std::vector<kernels::UniqueRow>& unique_rows() const { return unique_; }
  // Ids of the batch last planned per table: user tables, then item tables.
  const std::vector<uint64_t>& ids_per_table() const { return ids_per_table_; }

 private:
  // Sorts every (table, row) of the batch, keeps one of each, and rewrites each id as
  // its slot in that unique list. Tables: user tables, then item tables.
  void Deduplicate(const Batch& batch);

  PackInfo info_;
  bool reorder_;
  std::vector<uint32_t> top_k_;
  std::vector<uint32_t> result_begin_{0};
  std::vector<uint64_t> ids_per_table_;
  std::vector<std::pair<uint64_t, uint32_t>> keys_;
  std::vector<kernels::UniqueRow> unique_;
  std::vector<int32_t> user_slots_;
  std::vector<int32_t> item_slots_;
};

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_BATCH_PACKER_H_
