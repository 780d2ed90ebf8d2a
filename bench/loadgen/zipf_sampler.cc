#include "bench/loadgen/zipf_sampler.h"

#include <cmath>
#include <numeric>

#include "engine/check.h"

namespace fuserank::bench {
namespace {

// log1p(x) / x, continuous at 0.
double Helper1(double x) {
  if (std::abs(x) > 1e-8) return std::log1p(x) / x;
  return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

// expm1(x) / x, continuous at 0.
double Helper2(double x) {
  if (std::abs(x) > 1e-8) return std::expm1(x) / x;
  return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

}  // namespace

ZipfSampler::ZipfSampler(int64_t n, double alpha) : n_(n < 1 ? 1 : n), alpha_(alpha) {
  // A NaN or infinite exponent makes every draw a rejection: Sample() would never return.
  FUSERANK_CHECK(std::isfinite(alpha) && alpha >= 0)
      << "Zipf exponent " << alpha << ": want a finite number >= 0 (callers validate it)";
  if (alpha_ == 0.0) {
    alpha_ = 0.0;
    return;
  }
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(static_cast<double>(n_) + 0.5);
  s_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

double ZipfSampler::H(double x) const { return std::exp(-alpha_ * std::log(x)); }

double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Helper2((1.0 - alpha_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = x * (1.0 - alpha_);
  if (t < -1.0) t = -1.0;  // rounding can push it just below -1
  return std::exp(Helper1(t) * x);
}

RowScatter::RowScatter(int64_t n, uint64_t seed, bool enabled) : n_(n < 1 ? 1 : n) {
  if (!enabled || n_ == 1) return;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  // A multiplier coprime with n makes rank -> (rank * a + b) % n a bijection.
  int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(n_));
  if (a < 1) a = 1;
  while (std::gcd(a, n_) != 1) a = a % (n_ - 1) + 1;
  a_ = a;
  b_ = static_cast<int64_t>(rng() % static_cast<uint64_t>(n_));
}

int64_t RowScatter::Map(int64_t rank0) const {
  // a_ and rank0 are below 2^31 for rows that fit int32; use 128 bits for the rest.
  const __int128 v = static_cast<__int128>(rank0) * a_ + b_;
  return static_cast<int64_t>(v % n_);
}

}  // namespace fuserank::bench
