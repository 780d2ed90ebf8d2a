#include "engine/hot_rows/frequency_sketch.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/base/internal/raw_logging.h"

namespace fuserank::engine {
namespace {

constexpr int kMaxDepth = 8;

// 64-bit finaliser (murmur3 fmix64): every input bit affects every output bit.
uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// A row hashes as its uint32 bits (as it always did), an id as its uint64 bits.
uint64_t Mix(int32_t row) { return Mix64(static_cast<uint32_t>(row)); }
uint64_t Mix(int64_t id) { return Mix64(static_cast<uint64_t>(id)); }

}  // namespace

FrequencySketchSizing::Options FrequencySketchSizing::OptionsForCapacity(int capacity) {
  constexpr int64_t kMaxWidth = int64_t{1} << 22;
  const int64_t candidates =
      std::clamp<int64_t>(2 * int64_t{capacity}, 64, 2 * int64_t{kMaxSketchedCapacity});
  Options options;
  options.candidates = static_cast<int>(candidates);
  options.width = static_cast<int>(std::clamp<int64_t>(8 * candidates, 1024, kMaxWidth));
  options.depth = 4;
  return options;
}

template <typename Key>
size_t BasicFrequencySketch<Key>::EstimateMemoryBytes(const Options& options) {
  size_t width = 1;
  while (width < static_cast<size_t>(std::max(options.width, 1))) width *= 2;
  const size_t candidates = static_cast<size_t>(std::max(options.candidates, 1));
  // position_ reserves room for 2 * candidates at a load of at most 7/8, in a power of two
  // (absl's flat_hash_map): fewer than 2 * (2 * candidates * 8 / 7 + 1) slots.
  size_t slots = 1;
  while (slots < 2 * candidates * 8 / 7 + 1) slots *= 2;
  return sizeof(BasicFrequencySketch) +
         static_cast<size_t>(std::max(options.depth, 1)) * width * 4 +
         candidates * sizeof(Candidate) + 2 * slots * (sizeof(std::pair<Key, uint32_t>) + 1);
}

template <typename Key>
BasicFrequencySketch<Key>::BasicFrequencySketch(const Options& options)
    : depth_(options.depth), max_candidates_(static_cast<size_t>(options.candidates)) {
  ABSL_RAW_CHECK(options.width >= 1 && options.width <= (1 << 30), "sketch width out of range");
  ABSL_RAW_CHECK(depth_ >= 1 && depth_ <= kMaxDepth, "sketch depth out of range");
  ABSL_RAW_CHECK(options.candidates >= 1, "sketch candidates must be >= 1");
  size_t width = 1;
  while (width < static_cast<size_t>(options.width)) width *= 2;
  mask_ = static_cast<uint32_t>(width - 1);
  counters_.assign(static_cast<size_t>(depth_) * width, 0);
  heap_.reserve(max_candidates_);
  // Twice the tracked rows: an erase + insert churn never makes the table grow.
  position_.reserve(2 * max_candidates_);
}

template <typename Key>
uint32_t BasicFrequencySketch<Key>::Increment(Key row) {
  const uint64_t h = Mix(row);
  const uint32_t h1 = static_cast<uint32_t>(h);
  const uint32_t h2 = static_cast<uint32_t>(h >> 32) | 1u;
  const size_t width = static_cast<size_t>(mask_) + 1;
  uint32_t* cells[kMaxDepth];
  uint32_t estimate = std::numeric_limits<uint32_t>::max();
  for (int d = 0; d < depth_; ++d) {
    cells[d] = &counters_[d * width + ((h1 + static_cast<uint32_t>(d) * h2) & mask_)];
    estimate = std::min(estimate, *cells[d]);
  }
  if (estimate == std::numeric_limits<uint32_t>::max()) return estimate;  // saturated
  ++estimate;
  // Conservative update: raise only the counters below the new estimate.
  for (int d = 0; d < depth_; ++d) *cells[d] = std::max(*cells[d], estimate);
  return estimate;
}

template <typename Key>
uint32_t BasicFrequencySketch<Key>::Estimate(Key row) const {
  const uint64_t h = Mix(row);
  const uint32_t h1 = static_cast<uint32_t>(h);
  const uint32_t h2 = static_cast<uint32_t>(h >> 32) | 1u;
  const size_t width = static_cast<size_t>(mask_) + 1;
  uint32_t estimate = std::numeric_limits<uint32_t>::max();
  for (int d = 0; d < depth_; ++d) {
    estimate =
        std::min(estimate, counters_[d * width + ((h1 + static_cast<uint32_t>(d) * h2) & mask_)]);
  }
  return estimate;
}

template <typename Key>
void BasicFrequencySketch<Key>::Observe(Key row) {
  ++observed_;
  const uint32_t estimate = Increment(row);
  // Most rows of a skewed stream are cold: they cannot enter a full heap, and a tracked
  // row whose estimate is <= the minimum already holds that count.
  if (heap_.size() == max_candidates_ && estimate <= heap_[0].count) return;
  if (auto it = position_.find(row); it != position_.end()) {
    heap_[it->second].count = estimate;
    SiftDown(it->second);
    return;
  }
  if (heap_.size() < max_candidates_) {
    heap_.push_back({estimate, row});
    position_[row] = static_cast<uint32_t>(heap_.size() - 1);
    SiftUp(heap_.size() - 1);
    return;
  }
  position_.erase(heap_[0].row);
  Place(0, {estimate, row});
  SiftDown(0);
}

template <typename Key>
void BasicFrequencySketch<Key>::Place(size_t i, Candidate c) {
  heap_[i] = c;
  position_[c.row] = static_cast<uint32_t>(i);
}

template <typename Key>
void BasicFrequencySketch<Key>::SiftDown(size_t i) {
  const Candidate c = heap_[i];
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= heap_.size()) break;
    if (child + 1 < heap_.size() && heap_[child + 1].count < heap_[child].count) ++child;
    if (heap_[child].count >= c.count) break;
    Place(i, heap_[child]);
    i = child;
  }
  Place(i, c);
}

template <typename Key>
void BasicFrequencySketch<Key>::SiftUp(size_t i) {
  const Candidate c = heap_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (heap_[parent].count <= c.count) break;
    Place(i, heap_[parent]);
    i = parent;
  }
  Place(i, c);
}

template <typename Key>
std::vector<std::pair<Key, uint32_t>> BasicFrequencySketch<Key>::TopN(int n) const {
  std::vector<std::pair<Key, uint32_t>> top;
  top.reserve(heap_.size());
  for (const Candidate& c : heap_) {
    const uint32_t estimate = Estimate(c.row);
    if (estimate > 0) top.emplace_back(c.row, estimate);
  }
  const auto higher = [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  const size_t keep = std::min(top.size(), static_cast<size_t>(std::max(n, 0)));
  std::partial_sort(top.begin(), top.begin() + keep, top.end(), higher);
  top.resize(keep);
  return top;
}

template <typename Key>
void BasicFrequencySketch<Key>::Decay() {
  for (uint32_t& c : counters_) c >>= 1;
  // Halving keeps the heap order (a <= b implies a/2 <= b/2).
  for (Candidate& c : heap_) c.count >>= 1;
}

template <typename Key>
size_t BasicFrequencySketch<Key>::MemoryBytes() const {
  return sizeof(*this) + counters_.capacity() * sizeof(uint32_t) +
         heap_.capacity() * sizeof(Candidate) +
         position_.capacity() * (sizeof(std::pair<Key, uint32_t>) + 1);
}

template class BasicFrequencySketch<int32_t>;
template class BasicFrequencySketch<int64_t>;

}  // namespace fuserank::engine
