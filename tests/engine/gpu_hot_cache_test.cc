// The HBM hot-row cache of cache.placement: host, tested without a GPU: the image the CUDA
// backend uploads per table (engine/cuda/hot_cache_image.h) probed with the kernel's own
// HotCacheSlot (kernels/hot_cache.h, FUSERANK_HD): every hot row found at its set's slot
// and holding the table's device row bit for bit (fp32, fp16, bf16, int8 with its scale and
// bias), every other row missing; an empty set gives no index; the images follow the
// lookup order of the GpuLayout (user tables, then item tables).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "engine/cuda/device_rows.h"
#include "engine/cuda/gpu_layout.h"
#include "engine/cuda/hot_cache_image.h"
#include "engine/hot_rows/hot_rows.h"
#include "engine/model_types.h"
#include "gtest/gtest.h"
#include "kernels/hot_cache.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

std::shared_ptr<const Model> MakeModel(DType dtype, int64_t rows, int dim, uint64_t seed) {
  ModelSpec spec = fuserank::testing::SmallSpec(1, 2, rows, dim);
  spec.embedding_dtype = dtype;
  std::mt19937_64 rng(seed);
  fuserank::testing::TestModel test_model;
  auto model = test::BuildVariantModel(spec, seed, rng, &test_model);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

// The device row `row` of `table`, as DeviceModel::Upload lays it out.
std::vector<std::byte> DeviceRow(const EmbeddingTable& table, int64_t row) {
  std::vector<std::byte> out(DeviceRowBytes(table));
  if (DeviceRowsAreStored(table)) {
    std::memcpy(out.data(), table.data + static_cast<size_t>(row) * table.row_bytes, out.size());
  } else {
    PackInt8Rows(table, row, 1, out.data());
  }
  return out;
}

struct Case {
  DType dtype;
  int dim;
};

class HotCacheImageTest : public ::testing::TestWithParam<Case> {};

TEST_P(HotCacheImageTest, TheKernelsProbeFindsEveryHotRowWithItsBytesAndNothingElse) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  const int64_t rows = 5000;  // a table larger than its cache
  const std::shared_ptr<const Model> model =
      MakeModel(GetParam().dtype, rows, GetParam().dim, seed);
  ASSERT_NE(model, nullptr);
  const EmbeddingTable& table = model->tables()[1];
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(rows) - 1);
  for (int hot : {1, 7, 300, 1024}) {
    SCOPED_TRACE(::testing::Message() << hot << " hot rows");
    std::vector<int32_t> hot_rows;
    std::set<int32_t> members;
    while (static_cast<int>(hot_rows.size()) < hot) {
      const int32_t r = any(rng);
      if (members.insert(r).second) hot_rows.push_back(r);
    }
    auto set = HotSet::FromRows(table, hot_rows, 4096);
    ASSERT_TRUE(set.ok()) << set.status();
    const HotCacheImage image = MakeHotCacheImage(table, **set);
    ASSERT_EQ(image.count, hot);
    ASSERT_EQ(image.rows.size(), static_cast<size_t>(hot) * DeviceRowBytes(table));
    ASSERT_EQ(image.index.size(), size_t{image.mask} + 1);
    // The host copy probed with the kernel's code, as the kernel probes the device copy.
    const kernels::HotCacheTable t =
        image.Table(image.index.data(), reinterpret_cast<const unsigned char*>(image.rows.data()));
    ASSERT_NE(t.d_index, nullptr);
    for (int32_t r = 0; r < rows; ++r) {
      const int32_t slot = kernels::HotCacheSlot(t, r);
      ASSERT_EQ(slot, (*set)->FindSlot(r)) << "row " << r;
      if (slot < 0) {
        ASSERT_EQ(members.count(r), 0u) << "row " << r;
        continue;
      }
      const std::vector<std::byte> want = DeviceRow(table, r);
      ASSERT_EQ(
          std::memcmp(t.d_rows + static_cast<size_t>(slot) * want.size(), want.data(), want.size()),
          0)
          << "row " << r << " in slot " << slot;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HotCacheImageTest,
                         ::testing::Values(Case{DType::kF32, 32}, Case{DType::kF32, 12},
                                           Case{DType::kF16, 32}, Case{DType::kBF16, 16},
                                           Case{DType::kInt8, 32}, Case{DType::kInt8, 12}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(DTypeName(info.param.dtype)) + "_dim" +
                                  std::to_string(info.param.dim);
                         });

TEST(HotCacheImageTest, AnEmptySetHasNoIndexSoEveryRowIsReadFromTheTable) {
  const std::shared_ptr<const Model> model = MakeModel(DType::kF32, 100, 8, 7);
  ASSERT_NE(model, nullptr);
  const HotCacheImage image =
      MakeHotCacheImage(model->tables()[0], *HotSet::Empty(model->tables()[0]));
  EXPECT_EQ(image.count, 0);
  EXPECT_TRUE(image.index.empty());
  EXPECT_TRUE(image.rows.empty());
  const kernels::HotCacheTable t = image.Table(nullptr, nullptr);
  EXPECT_EQ(t.d_index, nullptr);
  EXPECT_EQ(t.d_rows, nullptr);
}

TEST(HotCacheImageTest, ImagesFollowTheLookupOrderOfTheLayout) {
  const std::shared_ptr<const Model> model = MakeModel(DType::kF32, 200, 8, 11);
  ASSERT_NE(model, nullptr);
  auto layout = ComputeGpuLayout(*model);
  ASSERT_TRUE(layout.ok()) << layout.status();
  // Table i of the spec gets i + 1 hot rows, so each image says which table it came from.
  HotRowSnapshot snapshot;
  snapshot.version = 3;
  for (size_t i = 0; i < model->tables().size(); ++i) {
    std::vector<int32_t> rows;
    for (size_t r = 0; r <= i; ++r) rows.push_back(static_cast<int32_t>(10 * r + i));
    auto set = HotSet::FromRows(model->tables()[i], rows, 64);
    ASSERT_TRUE(set.ok()) << set.status();
    snapshot.tables.push_back(*set);
  }
  const std::vector<HotCacheImage> images = MakeHotCacheImages(*model, *layout, snapshot);
  ASSERT_EQ(images.size(), layout->lookup_spec_index.size());
  for (size_t k = 0; k < images.size(); ++k) {
    EXPECT_EQ(images[k].count, layout->lookup_spec_index[k] + 1) << "lookup table " << k;
  }
}

}  // namespace
}  // namespace fuserank::engine::cuda
