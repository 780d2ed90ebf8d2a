// Draws ranks k in [1, n] with P(k) proportional to 1 / k^alpha by rejection-inversion
// (Hoermann & Derflinger 1996): O(1) memory and time per draw for any n, so tables of
// billions of rows cost nothing to set up. alpha == 0 is uniform.
// Immutable after construction; Sample() is const and thread-safe given a private RNG.
#ifndef FUSERANK_BENCH_LOADGEN_ZIPF_SAMPLER_H_
#define FUSERANK_BENCH_LOADGEN_ZIPF_SAMPLER_H_

#include <cstdint>
#include <random>

namespace fuserank::bench {

class ZipfSampler {
 public:
  // REQUIRES: n >= 1; alpha finite and >= 0 (checked: NaN or an infinity aborts, as
  // Sample() would never return).
  ZipfSampler(int64_t n, double alpha);

  // A rank in [1, n]; rank 1 is the most frequent.
  template <typename Rng>
  int64_t Sample(Rng& rng) const {
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    if (alpha_ == 0.0) {
      return 1 + std::uniform_int_distribution<int64_t>(0, n_ - 1)(rng);
    }
    return SampleFromUniform([&] { return uniform(rng); });
  }

  int64_t n() const { return n_; }
  double alpha() const { return alpha_; }

 private:
  template <typename Uniform>
  int64_t SampleFromUniform(Uniform next) const {
    while (true) {
      const double u = h_integral_n_ + next() * (h_integral_x1_ - h_integral_n_);
      const double x = HIntegralInverse(u);
      int64_t k = static_cast<int64_t>(x + 0.5);
      if (k < 1) k = 1;
      if (k > n_) k = n_;
      if (k - x <= s_ || u >= HIntegral(k + 0.5) - H(static_cast<double>(k))) return k;
    }
  }
  double H(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;

  int64_t n_;
  double alpha_;
  double h_integral_x1_ = 0;
  double h_integral_n_ = 0;
  double s_ = 0;
};

// A bijection of [0, n) that scatters Zipf ranks over a table's rows, so that the hot
// rows are not the first rows of the table (real ids are hashed): row = (rank * a + b) % n.
class RowScatter {
 public:
  // `seed` picks the multiplier and offset; enabled == false is the identity.
  RowScatter(int64_t n, uint64_t seed, bool enabled);
  int64_t Map(int64_t rank0) const;  // rank0 in [0, n)

 private:
  int64_t n_;
  int64_t a_ = 1;
  int64_t b_ = 0;
};

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_LOADGEN_ZIPF_SAMPLER_H_
