// AccessSampler: period 1 counts every access, a period samples about one in that many
// without aliasing with a periodic layout, and samples beyond the buffer are dropped and
// counted.
#include "engine/hot_rows/access_sampler.h"

#include <vector>

#include "engine/hot_rows/hot_row_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/hot_rows/hot_row_test_util.h"

namespace fuserank::engine {
namespace {

using test::HotRows;
using test::MakeHotRowManager;
using test::MakeHotRowTestModel;
using ::testing::ElementsAre;

TEST(AccessSamplerTest, PeriodOneCountsEveryAccess) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 10), 2);
  AccessSampler sampler(manager.get());
  for (int i = 0; i < 30; ++i) sampler.Observe(2, 9);
  const std::vector<int32_t> rows(20, 8);
  sampler.ObserveRows(2, rows);
  sampler.ObserveRows(2, {});
  EXPECT_EQ(sampler.sampled(), 50u);
  sampler.Flush();
  ASSERT_TRUE(manager->Rebuild({}).ok());
  EXPECT_THAT(HotRows(*manager, 2), ElementsAre(9, 8));
}

TEST(AccessSamplerTest, SamplesAboutOneInPeriodWithoutAliasing) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 11), 16, 16);
  AccessSampler sampler(manager.get(), 1 << 16, 3);
  // Row = position mod 16: a sampler with a fixed stride of 16 would only ever see one row.
  std::vector<int32_t> rows(1600);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(i % 16);
  for (int k = 0; k < 500; ++k) {
    if (k % 2 == 0) {
      sampler.ObserveRows(1, rows);
    } else {
      for (const int32_t row : rows) sampler.Observe(1, row);
    }
  }
  const double expected = 500.0 * 1600 / 16;
  EXPECT_NEAR(static_cast<double>(sampler.sampled()), expected, 0.03 * expected);
  sampler.Flush();
  ASSERT_TRUE(manager->Rebuild({}).ok());
  EXPECT_EQ(HotRows(*manager, 1).size(), 16u);
}

TEST(AccessSamplerTest, DropsSamplesBeyondItsBufferUntilFlushed) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 12), 4);
  AccessSampler sampler(manager.get(), 8);
  for (int32_t i = 0; i < 20; ++i) sampler.Observe(0, i);
  EXPECT_EQ(sampler.sampled(), 20u);
  EXPECT_EQ(sampler.dropped(), 12u);
  sampler.Flush();
  for (int32_t i = 0; i < 8; ++i) sampler.Observe(0, 99);
  EXPECT_EQ(sampler.dropped(), 12u);
}

}  // namespace
}  // namespace fuserank::engine
