// Row -> slot map of one hot set: open addressing with linear probing over two flat
// power-of-two arrays (keys: int32 rows, kEmpty = -1; values: slots), so a CPU worker
// probes it in a few instructions per id and a GPU kernel can probe a device copy of the
// same arrays with the same arithmetic (see Home()). The hash is multiply-shift with a
// multiplier drawn at random for each index: rows are chosen by clients (ids modulo the
// table's rows; with cache.policy: frequency the hot set follows their traffic), and under
// a fixed multiplier they could pick rows that fill one run of the table, so that every
// probe homed there walks it (thousands of steps per id instead of one or two).
// Immutable after construction; concurrent readers are safe.
#ifndef FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_INDEX_H_
#define FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace fuserank::engine {

class HotRowIndex {
 public:
  static constexpr int32_t kEmpty = -1;

  // An index that holds nothing (every probe misses).
  HotRowIndex() : HotRowIndex(absl::Span<const int32_t>()) {}
  // Maps rows[i] -> i. The arrays have the smallest power-of-two size >= 2 * rows.size()
  // (load factor <= 0.5, at least 2 entries, so every probe ends on an empty key). The
  // multiplier is drawn at random (RandomMultiplier), again while the longest run of
  // occupied entries exceeds MaxRun() (a few draws at most; the best one is kept).
  // REQUIRES: rows distinct, each >= 0; rows.size() <= 2^29.
  explicit HotRowIndex(absl::Span<const int32_t> rows);
  // The same with a given multiplier (tests, benchmarks). REQUIRES: `multiplier` odd.
  HotRowIndex(absl::Span<const int32_t> rows, uint32_t multiplier);

  // An odd multiplier with its top bit set, from the operating system's entropy.
  static uint32_t RandomMultiplier();
  // The longest run of occupied entries a random multiplier should stay within, for
  // arrays of `size` entries: 8 per bit of the size (104 at 8192), far above what linear
  // probing at load 0.5 gives.
  static size_t MaxRun(size_t size);

  // The slot of `row`, or -1 when `row` is not in the set (also for any row < 0).
  int32_t Find(int32_t row) const {
    uint32_t i = Home(row, multiplier_, shift_);
    for (;;) {
      const int32_t key = keys_[i];
      if (key == row) return values_[i];  // an empty key's value is -1
      if (key == kEmpty) return -1;
      i = (i + 1) & mask_;
    }
  }

  // First probe position of `row` for arrays of 2^(32 - shift) entries; the probe then
  // walks i = (i + 1) & mask until it finds `row` or kEmpty.
  static uint32_t Home(int32_t row, uint32_t multiplier, int shift) {
    return (static_cast<uint32_t>(row) * multiplier) >> shift;
  }

  // The flat layout, for copying to a device: keys()[i] is a row or kEmpty, values()[i]
  // its slot (-1 where the key is empty). size() == mask() + 1, a power of two.
  absl::Span<const int32_t> keys() const { return keys_; }
  absl::Span<const int32_t> values() const { return values_; }
  uint32_t mask() const { return mask_; }
  int shift() const { return shift_; }
  uint32_t multiplier() const { return multiplier_; }
  // The longest run of occupied entries (what a probe may walk at most, less one).
  size_t LongestRun() const;
  size_t MemoryBytes() const { return (keys_.capacity() + values_.capacity()) * sizeof(int32_t); }

 private:
  std::vector<int32_t> keys_;
  std::vector<int32_t> values_;
  // Fills keys_/values_ with `multiplier` (sizes already set).
  void Build(absl::Span<const int32_t> rows, uint32_t multiplier);

  uint32_t mask_ = 0;
  int shift_ = 32;
  uint32_t multiplier_ = 1;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_INDEX_H_
