// Bounded-memory access counting for one embedding table: a count-min sketch (conservative
// update) estimates each row's count, and a min-heap of `candidates` rows keeps the ones
// whose estimate beat the smallest tracked count, so TopN() needs no scan of the id space.
// Decay() halves every count, so rows that stop appearing fade. Memory is fixed at
// construction (MemoryBytes()) whatever the number of distinct rows; Observe allocates
// nothing. Counts every Observe call: sampling belongs to the caller (AccessSampler).
// Not thread-safe: the owner serialises calls (HotRowManager holds one per table under a
// mutex).
#ifndef FUSERANK_ENGINE_HOT_ROWS_FREQUENCY_SKETCH_H_
#define FUSERANK_ENGINE_HOT_ROWS_FREQUENCY_SKETCH_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace fuserank::engine {

// The largest hot-set capacity a sketch is sized for (cache.hot_rows_per_table with
// cache.policy: frequency is validated against it).
inline constexpr int kMaxSketchedCapacity = 1 << 20;

// The sizing every sketch shares, whatever it is keyed by.
struct FrequencySketchSizing {
  struct Options {
    int width = 1 << 16;    // counters per sketch row; rounded up to a power of two
    int depth = 4;          // sketch rows (independent hashes), 1..8
    int candidates = 8192;  // rows tracked for TopN; TopN(n) is exact-ish for n << this
  };
  // Options sized for a hot set of `capacity` rows (any int: the arithmetic is 64-bit and
  // clamped): candidates = clamp(2 * capacity, 64, 2 * kMaxSketchedCapacity), width =
  // clamp(8 * candidates, 1024, 2^22) rounded up, depth 4. Capacity 4096: ~1.4 MB;
  // kMaxSketchedCapacity: ~130 MB (64 MiB of counters, 16 MiB heap, ~50 MiB index).
  static Options OptionsForCapacity(int capacity);
};

// Keyed by `Key`: int32_t rows of a local table (FrequencySketch) or int64_t raw ids of a
// storage: redis table (IdFrequencySketch).
template <typename Key>
class BasicFrequencySketch : public FrequencySketchSizing {
 public:
  // At least what MemoryBytes() of a sketch made with `options` returns (computed without
  // allocating; for the memory budget, engine/model_memory.h).
  static size_t EstimateMemoryBytes(const Options& options);

  // REQUIRES: width >= 1, 1 <= depth <= 8, candidates >= 1.
  explicit BasicFrequencySketch(const Options& options);

  // Counts one access of `row` (any Key; rows are what the sketch is keyed by).
  void Observe(Key row);
  // Estimated count of `row`: >= its true (decayed) count, usually equal.
  uint32_t Estimate(Key row) const;
  // Up to `n` tracked rows by estimated count, highest first (ties: lower row first).
  std::vector<std::pair<Key, uint32_t>> TopN(int n) const;
  // Halves every count (rows that stop appearing fade: after k calls, 1/2^k remains).
  void Decay();
  // Accesses counted since construction (not decayed).
  uint64_t observed() const { return observed_; }
  // Bytes held, fixed after construction.
  size_t MemoryBytes() const;

 private:
  struct Candidate {
    uint32_t count;
    Key row;
  };
  // Adds one to `row`'s counters (conservative update); returns the new estimate.
  uint32_t Increment(Key row);
  void SiftDown(size_t i);
  void SiftUp(size_t i);
  void Place(size_t i, Candidate c);

  int depth_;
  uint32_t mask_;
  size_t max_candidates_;
  std::vector<uint32_t> counters_;               // depth_ x (mask_ + 1)
  std::vector<Candidate> heap_;                  // min-heap on count
  absl::flat_hash_map<Key, uint32_t> position_;  // row -> index in heap_
  uint64_t observed_ = 0;
};

extern template class BasicFrequencySketch<int32_t>;
extern template class BasicFrequencySketch<int64_t>;
using FrequencySketch = BasicFrequencySketch<int32_t>;
using IdFrequencySketch = BasicFrequencySketch<int64_t>;

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_HOT_ROWS_FREQUENCY_SKETCH_H_
