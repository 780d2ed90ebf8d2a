#include "bench/loadgen/zipf_sampler.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace fuserank::bench {
namespace {

class ZipfSamplerTest : public ::testing::TestWithParam<std::tuple<int64_t, double>> {};

// Draws many ranks and compares their histogram with P(k) = k^-alpha / H(n, alpha) by a
// chi-square statistic over bins of >= 50 expected draws (adjacent ranks merged).
TEST_P(ZipfSamplerTest, FrequenciesFollowThePowerLaw) {
  const auto [n, alpha] = GetParam();
  const uint64_t seed = 1000 + n + static_cast<uint64_t>(alpha * 100);
  const int draws = 200000;
  ZipfSampler sampler(n, alpha);
  std::mt19937_64 rng(seed);
  std::vector<int64_t> counts(n + 1, 0);
  for (int i = 0; i < draws; ++i) {
    const int64_t k = sampler.Sample(rng);
    ASSERT_GE(k, 1) << "seed " << seed;
    ASSERT_LE(k, n) << "seed " << seed;
    ++counts[k];
  }
  double norm = 0;
  for (int64_t k = 1; k <= n; ++k) norm += std::pow(static_cast<double>(k), -alpha);
  double chi2 = 0, expected = 0, observed = 0;
  int bins = 0;
  for (int64_t k = 1; k <= n; ++k) {
    expected += draws * std::pow(static_cast<double>(k), -alpha) / norm;
    observed += counts[k];
    if (expected >= 50 || k == n) {
      chi2 += (observed - expected) * (observed - expected) / expected;
      ++bins;
      expected = observed = 0;
    }
  }
  const double df = bins - 1;
  // A 6-sigma bound on chi-square(df): never fails by chance, fails for a wrong law.
  EXPECT_LE(chi2, df + 6 * std::sqrt(2 * df)) << "bins " << bins << " seed " << seed;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ZipfSamplerTest,
                         ::testing::Combine(::testing::Values(1, 2, 10, 1000, 20000),
                                            ::testing::Values(0.0, 0.5, 1.0, 1.05, 1.5)),
                         [](const auto& info) {
                           return "rows" + std::to_string(std::get<0>(info.param)) + "_alpha" +
                                  std::to_string(static_cast<int>(std::get<1>(info.param) * 100));
                         });

TEST(ZipfSamplerHugeTest, StaysInRangeAndFavoursRankOne) {
  const int64_t n = (int64_t{1} << 31) - 1;
  ZipfSampler sampler(n, 1.05);
  std::mt19937_64 rng(5);
  int64_t ones = 0, twos = 0;
  for (int i = 0; i < 100000; ++i) {
    const int64_t k = sampler.Sample(rng);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, n);
    ones += k == 1;
    twos += k == 2;
  }
  // P(1) / P(2) = 2^1.05 = 2.07.
  EXPECT_NEAR(static_cast<double>(ones) / twos, 2.07, 0.25);
}

// Any finite exponent >= 0 draws in range and returns: the rejection loop must accept a
// draw for exponents at the edges of double (tiny, just around 1, huge, the largest).
struct Exponent {
  const char* name;
  double alpha;
};

void PrintTo(const Exponent& e, std::ostream* os) { *os << e.alpha; }

class ZipfSamplerExtremeTest : public ::testing::TestWithParam<std::tuple<int64_t, Exponent>> {};

TEST_P(ZipfSamplerExtremeTest, EveryFiniteExponentDrawsInRange) {
  const auto [n, exponent] = GetParam();
  ZipfSampler sampler(n, exponent.alpha);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    const int64_t k = sampler.Sample(rng);
    ASSERT_GE(k, 1) << "alpha " << exponent.alpha;
    ASSERT_LE(k, n) << "alpha " << exponent.alpha;
  }
}

INSTANTIATE_TEST_SUITE_P(
    EdgesOfDouble, ZipfSamplerExtremeTest,
    ::testing::Combine(::testing::Values(1, 2, 1000, (int64_t{1} << 31) - 1),
                       ::testing::Values(Exponent{"denorm_min",
                                                  std::numeric_limits<double>::denorm_min()},
                                         Exponent{"tiny", 1e-300}, Exponent{"small", 1e-9},
                                         Exponent{"just_below_one", 1 - 1e-12},
                                         Exponent{"just_above_one", 1 + 1e-12},
                                         Exponent{"fifty", 50.0}, Exponent{"million", 1e6},
                                         Exponent{"googol", 1e100}, Exponent{"huge", 1e300},
                                         Exponent{"max", std::numeric_limits<double>::max()})),
    [](const auto& info) {
      return "rows" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param).name;
    });

// NaN or an infinity made every draw a rejection, and Sample() spun forever (fuserank-bench
// --zipf=nan hung): the constructor refuses them, and a negative exponent, outright.
TEST(ZipfSamplerDeathTest, NonFiniteOrNegativeExponentAborts) {
  for (double alpha :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity(), -1.0, -1e-300}) {
    EXPECT_DEATH(ZipfSampler(10, alpha), "Zipf exponent .*: want a finite number >= 0")
        << "alpha " << alpha;
  }
}

TEST(RowScatterTest, IsAPermutationOfTheRows) {
  for (int64_t n : {1, 2, 3, 97, 1000, 1024}) {
    for (uint64_t seed : {1, 2, 3}) {
      RowScatter scatter(n, seed, true);
      std::set<int64_t> rows;
      for (int64_t r = 0; r < n; ++r) {
        const int64_t row = scatter.Map(r);
        ASSERT_GE(row, 0);
        ASSERT_LT(row, n);
        rows.insert(row);
      }
      EXPECT_EQ(static_cast<int64_t>(rows.size()), n) << "n " << n << " seed " << seed;
    }
  }
}

TEST(RowScatterTest, MovesTheHotRowsAndCanBeTurnedOff) {
  RowScatter off(1000, 1, false);
  for (int64_t r = 0; r < 1000; ++r) ASSERT_EQ(off.Map(r), r);
  RowScatter on(1000000, 1, true);
  int moved = 0;
  for (int64_t r = 0; r < 10; ++r) moved += on.Map(r) != r;
  EXPECT_GE(moved, 9);
}

}  // namespace
}  // namespace fuserank::bench
