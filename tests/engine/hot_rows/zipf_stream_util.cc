#include "tests/engine/hot_rows/zipf_stream_util.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/container/flat_hash_set.h"

namespace fuserank::engine::test {

std::vector<int32_t> ZipfDraws(int32_t rows, double alpha, int64_t draws, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> cdf(rows);
  double total = 0;
  for (int32_t k = 0; k < rows; ++k) {
    total += std::pow(static_cast<double>(k + 1), -alpha);
    cdf[k] = total;
  }
  std::vector<int32_t> row_of_rank(rows);
  std::iota(row_of_rank.begin(), row_of_rank.end(), 0);
  std::shuffle(row_of_rank.begin(), row_of_rank.end(), rng);
  std::uniform_real_distribution<double> uniform(0.0, total);
  std::vector<int32_t> out;
  out.reserve(draws);
  for (int64_t i = 0; i < draws; ++i) {
    const auto it = std::upper_bound(cdf.begin(), cdf.end(), uniform(rng));
    const int64_t rank = std::min<int64_t>(it - cdf.begin(), rows - 1);
    out.push_back(row_of_rank[rank]);
  }
  return out;
}

std::vector<int64_t> CountRows(absl::Span<const int32_t> draws, int32_t rows) {
  std::vector<int64_t> counts(rows, 0);
  for (const int32_t row : draws) ++counts[row];
  return counts;
}

std::vector<int32_t> TrueTopN(absl::Span<const int64_t> counts, int n) {
  std::vector<int32_t> rows(counts.size());
  std::iota(rows.begin(), rows.end(), 0);
  std::stable_sort(rows.begin(), rows.end(),
                   [&](int32_t a, int32_t b) { return counts[a] > counts[b]; });
  rows.resize(std::min<size_t>(rows.size(), n));
  return rows;
}

double StrictOverlap(absl::Span<const int64_t> counts, absl::Span<const int32_t> chosen, int n) {
  const std::vector<int32_t> top = TrueTopN(counts, n);
  const absl::flat_hash_set<int32_t> top_set(top.begin(), top.end());
  int hits = 0;
  for (const int32_t row : chosen) hits += top_set.contains(row) ? 1 : 0;
  return static_cast<double>(hits) / n;
}

double TieAwareOverlap(absl::Span<const int64_t> counts, absl::Span<const int32_t> chosen, int n) {
  const std::vector<int32_t> top = TrueTopN(counts, n);
  const int64_t boundary = counts[top.back()];
  const absl::flat_hash_set<int32_t> distinct(chosen.begin(), chosen.end());
  int good = 0;
  for (const int32_t row : distinct) good += counts[row] >= boundary ? 1 : 0;
  return static_cast<double>(std::min(good, n)) / n;
}

}  // namespace fuserank::engine::test
