// How MLP weights are laid out for cuBLASLt (engine/cuda/gpu_layout.h PitchedRows with
// PaddedLd): every row starts 16-byte aligned, the values are the model's, the pad zero.
#include <cstdint>
#include <random>
#include <vector>

#include "engine/cuda/gpu_layout.h"
#include "gtest/gtest.h"

namespace fuserank::engine::cuda {
namespace {

TEST(GpuWeightPitchTest, PaddedRowsAreAlignedAndHoldTheMatrixWithZeroPad) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int cols : {1, 3, 4, 5, 13, 16, 383, 512, 1023}) {
    for (int rows : {0, 1, 7, 64}) {
      std::vector<float> w(static_cast<size_t>(rows) * cols);
      for (float& x : w) x = dist(rng);
      const int ld = PaddedLd(cols);
      ASSERT_GE(ld, cols);
      ASSERT_LT(ld, cols + 4);
      ASSERT_EQ(ld * sizeof(float) % 16, 0u) << "cols=" << cols;
      const std::vector<float> p = PitchedRows(w, rows, cols, ld);
      ASSERT_EQ(p.size(), static_cast<size_t>(rows) * ld);
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < ld; ++c) {
          const float want = c < cols ? w[static_cast<size_t>(r) * cols + c] : 0.0f;
          // Bit equality: the upload must not change a weight.
          ASSERT_EQ(p[static_cast<size_t>(r) * ld + c], want) << "r=" << r << " c=" << c;
        }
      }
    }
  }
}

// A product over the pitched rows (as cuBLASLt reads W with lda = ld) equals the one over
// the model's rows: the pad never enters a sum.
TEST(GpuWeightPitchTest, AProductOverPitchedRowsIsTheModelsProduct) {
  const int out = 5, in = 383, ld = PaddedLd(in);
  std::vector<float> w(static_cast<size_t>(out) * in), x(in);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : w) v = dist(rng);
  for (float& v : x) v = dist(rng);
  const std::vector<float> p = PitchedRows(w, out, in, ld);
  for (int o = 0; o < out; ++o) {
    float plain = 0.0f, pitched = 0.0f;
    for (int i = 0; i < in; ++i) plain += w[static_cast<size_t>(o) * in + i] * x[i];
    for (int i = 0; i < in; ++i) pitched += p[static_cast<size_t>(o) * ld + i] * x[i];
    EXPECT_EQ(plain, pitched) << "o=" << o;
  }
}

}  // namespace
}  // namespace fuserank::engine::cuda
