// PooledLookup against a double-precision pooling written here from SPEC section 2,
// step 2, over dtypes (int8: scale * q + bias per row), pooling modes, weights, empty bags, zero
// weight sums, repeated ids, bag strides and both code paths.
#include "engine/cpu/cpu_lookup.h"

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "engine/cpu/cpu_dtype.h"
#include "engine/cpu/cpu_simd.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/dtype_reference_util.h"

namespace fuserank::engine {
namespace {

constexpr float kPoison = -9999.0f;

struct TestTable {
  EmbeddingTable table;
  std::vector<std::byte> storage;
  std::vector<float> qparams;  // int8: (scale, bias) per row
  std::vector<double> values;  // as stored, decoded
};

TestTable MakeTable(DType dtype, Pooling pooling, int64_t rows, int dim, std::mt19937_64& rng) {
  TestTable t;
  const size_t element = dtype == DType::kF32 ? 4 : dtype == DType::kInt8 ? 1 : 2;
  t.table.name = "t";
  t.table.dtype = dtype;
  t.table.pooling = pooling;
  t.table.rows = rows;
  t.table.dim = dim;
  t.table.row_bytes = element * dim;
  t.storage.resize(rows * t.table.row_bytes);
  if (dtype == DType::kInt8) {  // value = scale * q + bias, per row
    std::uniform_int_distribution<int> q(-128, 127), step(1, 16), offset(-64, 64);
    for (int64_t r = 0; r < rows; ++r) {
      const float scale = step(rng) / 256.0f, bias = offset(rng) / 128.0f;
      t.qparams.push_back(scale);
      t.qparams.push_back(bias);
      for (int j = 0; j < dim; ++j) {
        const int8_t v = static_cast<int8_t>(q(rng));
        std::memcpy(t.storage.data() + r * dim + j, &v, 1);
        t.values.push_back(static_cast<double>(scale) * v + bias);
      }
    }
    t.table.data = t.storage.data();
    t.table.qparams = t.qparams.data();
    return t;
  }
  for (int64_t i = 0; i < rows * dim; ++i) {
    const float v = test::RandomExactValue(dtype, rng);
    std::byte* dst = t.storage.data() + i * element;
    if (dtype == DType::kF32) {
      std::memcpy(dst, &v, 4);
      t.values.push_back(v);
    } else {
      uint16_t bits = dtype == DType::kF16 ? FloatToHalf(v) : FloatToBFloat16(v);
      std::memcpy(dst, &bits, 2);
      t.values.push_back(dtype == DType::kF16 ? test::DecodeHalfReference(bits)
                                              : test::DecodeBFloat16Reference(bits));
    }
  }
  t.table.data = t.storage.data();
  return t;
}

class PooledLookupTest
    : public testing::TestWithParam<std::tuple<DType, Pooling, bool /*generic*/>> {
 protected:
  void SetUp() override { ForceGenericCpuPaths(std::get<2>(GetParam())); }
  void TearDown() override { ForceGenericCpuPaths(false); }
};

TEST_P(PooledLookupTest, MatchesDoubleReference) {
  const auto [dtype, pooling, generic] = GetParam();
  const uint64_t seed = 42 + static_cast<int>(dtype) * 10 + static_cast<int>(pooling);
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int dim : {1, 3, 8, 16, 33}) {
    SCOPED_TRACE(testing::Message() << "dim=" << dim);
    const int64_t rows = 37;
    const TestTable t = MakeTable(dtype, pooling, rows, dim, rng);
    // 3 "tables" interleaved (bag_stride 3); this table's bags start at bag 1.
    const int stride = 3, first = 1, bags = 40;
    BagSet set;
    std::uniform_int_distribution<int> size_dist(0, 6), row_dist(0, rows - 1);
    std::uniform_real_distribution<float> weight_dist(0.25f, 2.0f);
    for (int b = 0; b < bags * stride; ++b) {
      const int k = b % 7 == 1 ? 0 : size_dist(rng);  // some empty bags
      const int repeated = row_dist(rng);
      for (int i = 0; i < k; ++i) {
        set.rows.push_back(i % 3 == 2 ? repeated : row_dist(rng));
        set.weights.push_back(b % 5 == 0 ? 1.0f : weight_dist(rng));
      }
      if (b % 11 == 4 && k >= 2) {  // weights that sum to exactly zero
        const size_t last = set.weights.size() - 1;
        for (size_t i = last - (k - 1); i < last; ++i) set.weights[i] = 0.5f;
        set.weights[last] = -0.5f * (k - 1);
      }
      set.bag_begin.push_back(static_cast<uint32_t>(set.rows.size()));
    }
    const int out_stride = dim + 2;
    std::vector<float> out(static_cast<size_t>(bags) * out_stride, kPoison);
    PooledLookup(t.table, set, first, stride, bags, out.data(), out_stride);
    for (int k = 0; k < bags; ++k) {
      const int b = first + k * stride;
      std::vector<double> want(dim, 0.0), scale(dim, 1.0);  // scale: 1 + sum |terms|
      double weight_sum = 0;
      for (uint32_t i = set.bag_begin[b]; i < set.bag_begin[b + 1]; ++i) {
        for (int j = 0; j < dim; ++j) {
          const double term = set.weights[i] * t.values[set.rows[i] * dim + j];
          want[j] += term;
          scale[j] += std::fabs(term);
        }
        weight_sum += set.weights[i];
      }
      if (pooling == Pooling::kMean) {
        for (int j = 0; j < dim; ++j) {
          want[j] = weight_sum == 0 ? 0.0 : want[j] / weight_sum;
          if (weight_sum != 0) scale[j] /= std::fabs(weight_sum);
        }
      }
      for (int j = 0; j < dim; ++j) {
        ASSERT_NEAR(out[k * out_stride + j], want[j], 1e-6 * scale[j]) << "bag " << b << " j " << j;
      }
      for (int j = dim; j < out_stride; ++j) ASSERT_EQ(out[k * out_stride + j], kPoison);
    }
  }
}

// SPEC: a mean is zero when the sum of the weights is 0. These weights sum to 0, but added
// one by one in float they leave -2^-24 (1 + 2^-24 rounds to 1), and dividing the pooled
// vector by that leftover gave values around 2^24 instead of zeros.
TEST(PooledLookupMeanTest, WeightsThatCancelExactlyGiveTheZeroMean) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kInt8}) {
    for (bool generic : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "dtype " << static_cast<int>(dtype) << " generic " << generic);
      ForceGenericCpuPaths(generic);
      std::mt19937_64 rng(7);
      for (int dim : {1, 8, 33}) {
        SCOPED_TRACE(testing::Message() << "dim=" << dim);
        const TestTable t = MakeTable(dtype, Pooling::kMean, 16, dim, rng);
        BagSet set;
        set.rows = {3, 5, 9, 12};
        set.weights = {1.0f, 0x1p-24f, -1.0f, -0x1p-24f};
        set.bag_begin.push_back(4);
        std::vector<float> out(dim, kPoison);
        PooledLookup(t.table, set, 0, 1, 1, out.data(), dim);
        for (int j = 0; j < dim; ++j) EXPECT_EQ(out[j], 0.0f) << "j " << j;
      }
    }
  }
  ForceGenericCpuPaths(false);
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypes, PooledLookupTest,
    testing::Combine(testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kInt8),
                     testing::Values(Pooling::kSum, Pooling::kMean), testing::Bool()));

TEST(PooledLookupEdgeTest, NoBagsWritesNothing) {
  std::mt19937_64 rng(1);
  const TestTable t = MakeTable(DType::kF32, Pooling::kSum, 4, 2, rng);
  BagSet set;
  float out[2] = {kPoison, kPoison};
  PooledLookup(t.table, set, 0, 1, 0, out, 2);
  EXPECT_EQ(out[0], kPoison);
  EXPECT_EQ(out[1], kPoison);
}

}  // namespace
}  // namespace fuserank::engine
