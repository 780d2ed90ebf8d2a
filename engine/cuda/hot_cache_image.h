// What the CUDA backend uploads as one table's HBM hot-row cache (cache.placement: host):
// the hot set's row -> slot index with its key and slot arrays interleaved
// (kernels/hot_cache.h) and the hot rows in slot order as device rows (int8 rows with their
// scale and bias, engine/cuda/device_rows.h). Plain C++ (no CUDA): the CPU tests probe the
// image with the kernel's own HotCacheSlot. Pure functions, thread-safe.
#ifndef FUSERANK_ENGINE_CUDA_HOT_CACHE_IMAGE_H_
#define FUSERANK_ENGINE_CUDA_HOT_CACHE_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/cuda/gpu_layout.h"
#include "engine/hot_rows/hot_rows.h"
#include "engine/model.h"
#include "kernels/hot_cache.h"

namespace fuserank::engine::cuda {

struct HotCacheImage {
  std::vector<kernels::HotCacheEntry> index;  // empty: the set has no rows
  std::vector<std::byte> rows;                // size() * DeviceRowBytes(table), slot order
  uint32_t mask = 0;
  int32_t shift = 31;
  uint32_t multiplier = 1;  // HotRowIndex::multiplier()
  int count = 0;            // rows in the set
  // The descriptor of this image with its arrays at `d_index` and `d_rows` (host or device
  // addresses of copies of index and rows); no hot rows when the image is empty.
  kernels::HotCacheTable Table(const kernels::HotCacheEntry* d_index,
                               const unsigned char* d_rows) const;
};

// The image of `set`, a hot set of `table`. REQUIRES: set.compact_table() has table's
// dtype and dim (HotSet::FromIds/FromRows/Empty of `table`); a local table's set.
HotCacheImage MakeHotCacheImage(const EmbeddingTable& table, const HotSet& set);

// One image per lookup table of `layout` (user tables, then item tables), from `snapshot`.
std::vector<HotCacheImage> MakeHotCacheImages(const Model& model, const GpuLayout& layout,
                                              const HotRowSnapshot& snapshot);

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_HOT_CACHE_IMAGE_H_
