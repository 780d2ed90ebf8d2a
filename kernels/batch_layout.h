// The packed batch: everything one batch needs on the GPU, laid out in one buffer that
// the host fills in pinned memory and copies to the device in one transfer. A fixed
// header comes first; the kernels find every section through its byte offset, so a
// CUDA graph captured once serves every batch of its size bucket.
// Plain data and pure functions; no CUDA header is needed to include this file.
#ifndef FUSERANK_KERNELS_BATCH_LAYOUT_H_
#define FUSERANK_KERNELS_BATCH_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "kernels/hd.h"

namespace fuserank::kernels {

// Sections start on this many bytes (16-byte vector loads of the dense sections).
inline constexpr uint32_t kSectionAlign = 16;

// One deduplicated (table, row) of the id-reorder pass: `table` indexes the combined
// table list (user tables, then item tables).
struct UniqueRow {
  uint32_t table;
  int32_t row;
};

struct PackedHeader {
  uint32_t num_requests = 0;
  uint32_t num_candidates = 0;
  uint32_t num_user_bags = 0;  // num_requests * user tables
  uint32_t num_item_bags = 0;  // num_candidates * item tables
  uint32_t num_user_ids = 0;
  uint32_t num_item_ids = 0;
  uint32_t total_results = 0;  // sum over requests of min(top_k, count)
  uint32_t max_segment = 0;    // candidates of the longest request
  uint32_t has_weights = 0;    // 0: every weight is 1 and the weight sections are empty
  uint32_t num_unique = 0;     // reorder pass: unique rows; 0 when the pass is off
  uint32_t total_bytes = 0;    // header and every section
  // Byte offsets from the start of the buffer.
  uint32_t candidate_begin = 0;  // uint32[num_requests + 1]
  uint32_t top_k = 0;            // uint32[num_requests]: min(top_k, count)
  uint32_t result_begin = 0;     // uint32[num_requests + 1]: prefix sums of top_k
  uint32_t user_bag_begin = 0;   // uint32[num_user_bags + 1]
  uint32_t user_rows = 0;        // int32[num_user_ids]: rows, or unique slots (reorder)
  uint32_t user_weights = 0;     // float[num_user_ids] when has_weights
  uint32_t item_bag_begin = 0;   // uint32[num_item_bags + 1]
  uint32_t item_rows = 0;        // int32[num_item_ids]
  uint32_t item_weights = 0;     // float[num_item_ids] when has_weights
  uint32_t user_dense = 0;       // float[num_requests * dense_user]
  uint32_t item_dense = 0;       // float[num_candidates * dense_item]
  uint32_t unique_rows = 0;      // UniqueRow[num_unique]
  uint32_t reserved[9] = {};
};
static_assert(sizeof(PackedHeader) == 128, "PackedHeader is one 128-byte block");

// Counts that fix the layout of one packed batch.
struct PackedCounts {
  uint32_t num_requests = 0;
  uint32_t num_candidates = 0;
  uint32_t user_tables = 0;
  uint32_t item_tables = 0;
  uint32_t num_user_ids = 0;
  uint32_t num_item_ids = 0;
  uint32_t dense_user = 0;
  uint32_t dense_item = 0;
  bool has_weights = false;
  uint32_t num_unique = 0;
};

// Fills the counts and section offsets of `h` (the fields the data decides, total_results
// and max_segment, are left to the packer). Returns false when the batch does not fit
// 32-bit offsets.
inline bool ComputePackedLayout(const PackedCounts& c, PackedHeader* h) {
  uint64_t off = sizeof(PackedHeader);
  bool fits = true;
  auto section = [&](uint64_t bytes) -> uint32_t {
    const uint64_t start = off;
    off = (off + bytes + kSectionAlign - 1) / kSectionAlign * kSectionAlign;
    if (off > 0xFFFFFFFFull) fits = false;
    return static_cast<uint32_t>(start);
  };
  const uint64_t user_bags = uint64_t{c.num_requests} * c.user_tables;
  const uint64_t item_bags = uint64_t{c.num_candidates} * c.item_tables;
  h->num_requests = c.num_requests;
  h->num_candidates = c.num_candidates;
  h->num_user_bags = static_cast<uint32_t>(user_bags);
  h->num_item_bags = static_cast<uint32_t>(item_bags);
  h->num_user_ids = c.num_user_ids;
  h->num_item_ids = c.num_item_ids;
  h->has_weights = c.has_weights ? 1 : 0;
  h->num_unique = c.num_unique;
  h->candidate_begin = section(4 * (uint64_t{c.num_requests} + 1));
  h->top_k = section(4 * uint64_t{c.num_requests});
  h->result_begin = section(4 * (uint64_t{c.num_requests} + 1));
  h->user_bag_begin = section(4 * (user_bags + 1));
  h->user_rows = section(4 * uint64_t{c.num_user_ids});
  h->user_weights = section(c.has_weights ? 4 * uint64_t{c.num_user_ids} : 0);
  h->item_bag_begin = section(4 * (item_bags + 1));
  h->item_rows = section(4 * uint64_t{c.num_item_ids});
  h->item_weights = section(c.has_weights ? 4 * uint64_t{c.num_item_ids} : 0);
  h->user_dense = section(4 * uint64_t{c.num_requests} * c.dense_user);
  h->item_dense = section(4 * uint64_t{c.num_candidates} * c.dense_item);
  h->unique_rows = section(sizeof(UniqueRow) * uint64_t{c.num_unique});
  h->total_bytes = static_cast<uint32_t>(off);
  return fits && user_bags < 0xFFFFFFFFull && item_bags < 0xFFFFFFFFull;
}

// A typed pointer to the section at byte offset `offset` of a packed batch.
template <typename T>
FUSERANK_HD const T* Section(const void* base, uint32_t offset) {
  return reinterpret_cast<const T*>(static_cast<const unsigned char*>(base) + offset);
}
template <typename T>
FUSERANK_HD T* MutableSection(void* base, uint32_t offset) {
  return reinterpret_cast<T*>(static_cast<unsigned char*>(base) + offset);
}

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_BATCH_LAYOUT_H_
