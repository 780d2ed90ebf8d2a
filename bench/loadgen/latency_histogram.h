// A log-linear latency histogram (HdrHistogram-like) over non-negative int64 values
// (nanoseconds in fuserank-bench): exact below 2^(kSubBucketBits+1), then 2^kSubBucketBits
// linear buckets per power of two, so a reported percentile is within 1/256 of the truth.
// Not thread-safe: keep one per thread and Merge() them.
#ifndef FUSERANK_BENCH_LOADGEN_LATENCY_HISTOGRAM_H_
#define FUSERANK_BENCH_LOADGEN_LATENCY_HISTOGRAM_H_

#include <cstdint>
#include <vector>

namespace fuserank::bench {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 8;

  LatencyHistogram();

  // Records one value; negative values are recorded as 0.
  void Record(int64_t value);
  // Adds every value recorded in `other`.
  void Merge(const LatencyHistogram& other);
  void Reset();

  int64_t count() const { return count_; }
  // Exact minimum, maximum and mean of the recorded values (0 when empty).
  int64_t min() const { return count_ == 0 ? 0 : min_; }
  int64_t max() const { return max_; }
  double mean() const;
  // The value at quantile `q` in [0, 1]: the smallest recorded value v such that at least
  // ceil(q * count) values are <= v, rounded up to its bucket's upper bound and clamped to
  // max(). 0 when empty.
  int64_t ValueAtQuantile(double q) const;

  // Bucket arithmetic, exposed for tests.
  static int BucketIndex(int64_t value);
  static int64_t BucketLowerBound(int index);
  static int64_t BucketUpperBound(int index);  // inclusive
  static int NumBuckets();

 private:
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  long double sum_ = 0;
};

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_LOADGEN_LATENCY_HISTOGRAM_H_
