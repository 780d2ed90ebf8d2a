// int8 tables on the CUDA path, tested without a GPU: the device row layout (codes, then
// scale and bias, 16-byte rows), the rows DeviceModel::Upload copies (PackInt8Rows), the
// decode the kernel uses against the CPU engine's, and the GpuLayout of an int8 model
// (served: row type, row bytes, vector path, lanes, gather stride).
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cpu/cpu_lookup.h"
#include "engine/cuda/device_rows.h"
#include "engine/cuda/gpu_layout.h"
#include "gtest/gtest.h"
#include "kernels/int8_rows.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

struct Int8Model {
  fuserank::testing::TestModel test_model;
  std::shared_ptr<const Model> model;
};

// SmallSpec(1, 2, rows, dim) with int8 tables (codes and a drawn (scale, bias) per row).
Int8Model MakeInt8Model(int64_t rows, int dim, uint64_t seed) {
  ModelSpec spec = fuserank::testing::SmallSpec(1, 2, rows, dim);
  spec.embedding_dtype = DType::kInt8;
  Int8Model m;
  std::mt19937_64 rng(seed);
  auto model = test::BuildVariantModel(spec, seed, rng, &m.test_model);
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) m.model = *model;
  return m;
}

TEST(Int8RowsTest, DeviceRowsHoldCodesThenAlignedParams) {
  const int dims[] = {1, 4, 8, 12, 16, 17, 100, 128, 255};
  const uint32_t want_bytes[] = {16, 16, 16, 32, 32, 32, 112, 144, 272};
  for (size_t k = 0; k < std::size(dims); ++k) {
    const int dim = dims[k];
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const uint32_t params = kernels::Int8ParamsOffset(dim);
    const uint32_t bytes = kernels::Int8DeviceRowBytes(dim);
    EXPECT_GE(params, static_cast<uint32_t>(dim));  // the codes come first
    EXPECT_LT(params, static_cast<uint32_t>(dim) + 8);
    EXPECT_EQ(params % 8, 0u);  // one 8-byte load reads (scale, bias)
    EXPECT_GE(bytes, params + 8);
    EXPECT_EQ(bytes % 16, 0u);  // every row of a table 16-byte aligned
    EXPECT_EQ(bytes, want_bytes[k]);
  }
}

TEST(Int8RowsTest, PackedRowsAreTheTableRowsWithTheirScaleAndBias) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  for (int dim : {4, 12, 128}) {
    const Int8Model m = MakeInt8Model(37, dim, seed);
    ASSERT_NE(m.model, nullptr);
    const EmbeddingTable& t = m.model->tables()[0];
    ASSERT_EQ(t.dtype, DType::kInt8);
    ASSERT_FALSE(DeviceRowsAreStored(t));
    const size_t row_bytes = DeviceRowBytes(t);
    ASSERT_EQ(row_bytes, kernels::Int8DeviceRowBytes(dim));
    std::vector<std::byte> all(static_cast<size_t>(t.rows) * row_bytes, std::byte{0x5a});
    PackInt8Rows(t, 0, t.rows, all.data());
    const size_t params = kernels::Int8ParamsOffset(dim);
    for (int64_t r = 0; r < t.rows; ++r) {
      const std::byte* row = all.data() + static_cast<size_t>(r) * row_bytes;
      ASSERT_EQ(std::memcmp(row, t.data + static_cast<size_t>(r) * t.row_bytes, dim), 0) << r;
      float sb[2];
      std::memcpy(sb, row + params, sizeof(sb));
      ASSERT_EQ(sb[0], t.qparams[2 * r]) << r;
      ASSERT_EQ(sb[1], t.qparams[2 * r + 1]) << r;
      for (size_t b = dim; b < params; ++b) ASSERT_EQ(row[b], std::byte{0}) << r << " byte " << b;
      for (size_t b = params + 8; b < row_bytes; ++b) {
        ASSERT_EQ(row[b], std::byte{0}) << r << " byte " << b;
      }
      // Every element decodes to the reference value of the test model (exact in float).
      const std::vector<float>& want = m.test_model.weights.at("embeddings." + t.name + ".weight");
      for (int e = 0; e < dim; ++e) {
        ASSERT_EQ(kernels::DequantizeInt8(static_cast<int8_t>(row[e]), sb[0], sb[1]),
                  want[static_cast<size_t>(r) * dim + e])
            << r << " element " << e;
      }
    }
    // A chunk packs exactly the same bytes as those rows of the whole table.
    std::vector<std::byte> chunk(5 * row_bytes);
    PackInt8Rows(t, 30, 5, chunk.data());
    EXPECT_EQ(std::memcmp(chunk.data(), all.data() + 30 * row_bytes, chunk.size()), 0);
  }
}

// One-row bags through the CPU engine give the decoded values: DequantizeInt8 is the CPU
// engine's value on its FMA path, within one rounding of the two-rounding generic path.
TEST(Int8RowsTest, DecodeIsTheCpuEngineValue) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  const Int8Model m = MakeInt8Model(64, 12, seed);
  ASSERT_NE(m.model, nullptr);
  const EmbeddingTable& t = m.model->tables()[1];
  std::vector<uint32_t> begin;
  std::vector<int32_t> rows;
  std::vector<float> weights;
  for (int32_t r = 0; r < t.rows; ++r) {
    begin.push_back(r);
    rows.push_back(r);
    weights.push_back(1.0f);
  }
  begin.push_back(static_cast<uint32_t>(t.rows));
  std::vector<float> out(static_cast<size_t>(t.rows) * t.dim);
  PooledLookup(t, begin.data(), rows.data(), weights.data(), 0, 1, static_cast<int>(t.rows),
               out.data(), t.dim);
  const int8_t* codes = reinterpret_cast<const int8_t*>(t.data);
  for (int64_t r = 0; r < t.rows; ++r) {
    for (int e = 0; e < t.dim; ++e) {
      const float got = kernels::DequantizeInt8(codes[r * t.row_bytes + e], t.qparams[2 * r],
                                                t.qparams[2 * r + 1]);
      const float want = out[static_cast<size_t>(r) * t.dim + e];
      ASSERT_NEAR(got, want, 1e-6 * std::max(1.0f, std::fabs(want))) << r << " " << e;
    }
  }
}

TEST(Int8RowsTest, LayoutServesInt8Tables) {
  struct Case {
    int dim;
    bool vector;
    int lanes;
  };
  // dim 16/128: 1/8 16-byte vectors of codes; dim 12/100: element loads, one lane each.
  for (const Case c :
       {Case{16, true, 4}, Case{128, true, 8}, Case{12, false, 16}, Case{100, false, 32}}) {
    SCOPED_TRACE(::testing::Message() << "dim " << c.dim);
    const Int8Model m = MakeInt8Model(20, c.dim, 7);
    ASSERT_NE(m.model, nullptr);
    auto g = ComputeGpuLayout(*m.model);
    ASSERT_TRUE(g.ok()) << g.status();  // was UNIMPLEMENTED before int8 was served
    EXPECT_EQ(g->row_type, kernels::RowType::kInt8);
    EXPECT_EQ(g->lanes, c.lanes);
    EXPECT_EQ(g->gather_stride, kernels::Int8DeviceRowBytes(c.dim));
    ASSERT_EQ(g->lookup.size(), 3u);
    for (const kernels::LookupTable& d : g->lookup) {
      EXPECT_EQ(d.row_bytes, kernels::Int8DeviceRowBytes(c.dim));
      EXPECT_EQ(d.vector, c.vector ? 1 : 0);
      EXPECT_EQ(d.dim, c.dim);
    }
  }
}

}  // namespace
}  // namespace fuserank::engine::cuda
