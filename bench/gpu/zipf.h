// Zipf(s) ranks for the GPU benches: rank 0 the hottest, drawn by inverse CDF over `n`
// ranks. The caller maps a rank to a row (itself, or scattered over the table).
// Not thread-safe (the caller's generator).
#ifndef FUSERANK_BENCH_GPU_ZIPF_H_
#define FUSERANK_BENCH_GPU_ZIPF_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace fuserank::bench {

class Zipf {
 public:
  Zipf(int64_t n, double s) : cdf_(static_cast<size_t>(n)) {
    double sum = 0;
    for (int64_t r = 0; r < n; ++r) cdf_[r] = sum += std::pow(static_cast<double>(r + 1), -s);
    for (double& c : cdf_) c /= sum;
  }
  int32_t operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<int32_t>(std::lower_bound(cdf_.begin(), cdf_.end() - 1, u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

// Rank r's row in a table of n rows when the hot rows are scattered over it.
inline int32_t ScatteredRow(int32_t rank, int64_t n) {
  return static_cast<int32_t>((static_cast<uint64_t>(rank) * 2654435761ull) %
                              static_cast<uint64_t>(n));
}

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_GPU_ZIPF_H_
