// The HBM hot-row cache of a table whose rows live in host memory (cache.placement: host):
// a device copy of the hot set's row -> slot index (engine/hot_rows/hot_row_index.h, the
// same open addressing and multiply-shift hash, its two arrays interleaved so one 8-byte load
// reads a key and its slot) and the hot rows in slot order. The probe is FUSERANK_HD: the
// lookup kernel calls it on the device and the CPU tests call it on the host copy.
// No CUDA header: plain C++ code includes this file.
#ifndef FUSERANK_KERNELS_HOT_CACHE_H_
#define FUSERANK_KERNELS_HOT_CACHE_H_

#include <cstdint>

#include "kernels/hd.h"

namespace fuserank::kernels {

// One index entry: a table row (kHotEmpty: none) and its slot in the cache's rows.
struct alignas(8) HotCacheEntry {
  int32_t row;
  int32_t slot;
};
inline constexpr int32_t kHotEmpty = -1;
// The multiplier of indexes built with a fixed one (the shared-memory staging experiment,
// smem_staging.h); a hot set's index draws its own (HotRowIndex::multiplier()).
inline constexpr uint32_t kHotHashMultiplier = 0x9E3779B1u;

// One table's cache as the lookup kernel reads it (an array of them per worker, user
// tables then item tables, as LookupTable). d_index == nullptr: the table has no hot rows.
struct HotCacheTable {
  const HotCacheEntry* d_index = nullptr;  // mask + 1 entries
  const unsigned char* d_rows = nullptr;   // slot * LookupTable::row_bytes
  uint32_t mask = 0;
  int32_t shift = 31;                        // home of a row: (row * multiplier) >> shift
  uint32_t multiplier = kHotHashMultiplier;  // the host index's (HotRowIndex::multiplier())
};

FUSERANK_HD HotCacheEntry LoadHotEntry(const HotCacheEntry* p) {
#if defined(__CUDA_ARCH__)
  const int2 v = __ldg(reinterpret_cast<const int2*>(p));
  return HotCacheEntry{v.x, v.y};
#else
  return *p;
#endif
}

// The slot of `row` in `t`, or -1. The index has at least one empty entry (load <= 0.5),
// so the walk ends. REQUIRES: t.d_index != nullptr.
FUSERANK_HD int32_t HotCacheSlot(const HotCacheTable& t, int32_t row) {
  uint32_t i = (static_cast<uint32_t>(row) * t.multiplier) >> t.shift;
  for (;;) {
    const HotCacheEntry e = LoadHotEntry(t.d_index + i);
    if (e.row == row) return e.slot;
    if (e.row == kHotEmpty) return -1;
    i = (i + 1) & t.mask;
  }
}

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_HOT_CACHE_H_
