#include "bench/loadgen/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace fuserank::bench {
namespace {

constexpr int kSub = LatencyHistogram::kSubBucketBits;
constexpr int64_t kSubCount = int64_t{1} << kSub;
// Values below kExact are their own bucket.
constexpr int64_t kExact = kSubCount << 1;
// The largest shift: a positive int64 has its top bit at position 62 at most.
constexpr int kMaxShift = 62 - kSub;

}  // namespace

LatencyHistogram::LatencyHistogram() : counts_(NumBuckets(), 0) {}

int LatencyHistogram::NumBuckets() { return static_cast<int>((kMaxShift + 2) * kSubCount); }

int LatencyHistogram::BucketIndex(int64_t value) {
  if (value < kExact) return static_cast<int>(std::max<int64_t>(value, 0));
  const int msb = 63 - std::countl_zero(static_cast<uint64_t>(value));
  const int shift = msb - kSub;
  const int64_t sub = value >> shift;  // in [kSubCount, 2 * kSubCount)
  return static_cast<int>((shift + 1) * kSubCount + (sub - kSubCount));
}

int64_t LatencyHistogram::BucketLowerBound(int index) {
  if (index < kExact) return index;
  const int shift = static_cast<int>(index / kSubCount) - 1;
  const int64_t sub = index % kSubCount + kSubCount;
  return sub << shift;
}

int64_t LatencyHistogram::BucketUpperBound(int index) {
  if (index < kExact) return index;
  const int shift = static_cast<int>(index / kSubCount) - 1;
  const int64_t lower = BucketLowerBound(index);
  const int64_t width = int64_t{1} << shift;
  // The last bucket's bound would overflow int64.
  if (lower > std::numeric_limits<int64_t>::max() - (width - 1)) {
    return std::numeric_limits<int64_t>::max();
  }
  return lower + (width - 1);
}

void LatencyHistogram::Record(int64_t value) {
  value = std::max<int64_t>(value, 0);
  ++counts_[BucketIndex(value)];
  if (count_ == 0 || value < min_) min_ = value;
  if (value > max_) max_ = value;
  ++count_;
  sum_ += value;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  if (count_ == 0 || other.min_ < min_) min_ = other.min_;
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

void LatencyHistogram::Reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  min_ = 0;
  max_ = 0;
  sum_ = 0;
}

double LatencyHistogram::mean() const {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_ / count_);
}

int64_t LatencyHistogram::ValueAtQuantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  int64_t rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::clamp<int64_t>(rank, 1, count_);
  int64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      return std::clamp(BucketUpperBound(static_cast<int>(i)), min_, max_);
    }
  }
  return max_;
}

}  // namespace fuserank::bench
