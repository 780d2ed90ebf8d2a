// SamplingBackend: cache.policy: frequency for a backend whose lookups do not sample (the
// CUDA backend): the rows of every batch it scored reach the model's sketches under their
// own table (user bags, then each candidate's item bags, in the model's order), so a
// Rebuild installs the batch's most frequent rows; a batch the backend failed is not
// sampled; everything else is the inner backend's (the warm-up's flush of lookup counts
// included).
#include "engine/hot_rows/sampling_backend.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_backend_util.h"
#include "tests/engine/hot_rows/hot_row_test_util.h"

namespace fuserank::engine {
namespace {

using test::FakeBackend;
using test::HotRows;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// One request of three candidates on the hot-row test model (user_0; item_0, item_1).
Batch ThreeCandidates(std::shared_ptr<const Model> model) {
  Batch b;
  b.model = std::move(model);
  b.candidate_begin = {0, 3};
  b.top_k = {3};
  b.user.rows = {5, 5, 6};  // user_0: 5 twice, 6 once
  b.user.weights = {1, 1, 1};
  b.user.bag_begin = {0, 3};
  const std::vector<std::vector<int32_t>> item_bags = {
      {10}, {30, 31},  // candidate 0: item_0, item_1
      {10}, {31},      // candidate 1
      {20}, {}};       // candidate 2 (an empty item_1 bag)
  for (const auto& bag : item_bags) {
    b.item.rows.insert(b.item.rows.end(), bag.begin(), bag.end());
    b.item.weights.insert(b.item.weights.end(), bag.size(), 1.0f);
    b.item.bag_begin.push_back(static_cast<uint32_t>(b.item.rows.size()));
  }
  b.user_dense.assign(2, 0.0f);
  b.item_dense = {0.3f, 0, 0, 0.2f, 0, 0, 0.1f, 0, 0};
  return b;
}

TEST(SamplingBackendTest, TheRowsOfEveryScoredBatchReachTheirTablesSketch) {
  const std::shared_ptr<const Model> model = test::MakeHotRowTestModel(100, 4, DType::kF32, 3);
  auto manager = test::MakeHotRowManager(model, 2, /*sample_period=*/1);
  SamplingBackend backend(std::make_unique<FakeBackend>(2), manager.get());
  EXPECT_EQ(backend.num_workers(), 2);
  EXPECT_EQ(backend.device(), "fake");
  BatchResult result;
  ASSERT_TRUE(backend.Run(1, ThreeCandidates(model), &result).ok());
  EXPECT_EQ(result.result_begin, (std::vector<uint32_t>{0, 3}));
  ASSERT_TRUE(manager->Rebuild({}).ok());
  EXPECT_THAT(HotRows(*manager, 0), ElementsAre(5, 6));
  EXPECT_THAT(HotRows(*manager, 1), ElementsAre(10, 20));
  EXPECT_THAT(HotRows(*manager, 2), ElementsAre(31, 30));
}

TEST(SamplingBackendTest, ABatchTheBackendFailedIsNotSampled) {
  const std::shared_ptr<const Model> model = test::MakeHotRowTestModel(100, 4, DType::kF32, 3);
  auto manager = test::MakeHotRowManager(model, 2, /*sample_period=*/1);
  auto inner = std::make_unique<FakeBackend>(1);
  inner->set_fail(true);
  SamplingBackend backend(std::move(inner), manager.get());
  BatchResult result;
  EXPECT_FALSE(backend.Run(0, ThreeCandidates(model), &result).ok());
  ASSERT_TRUE(manager->Rebuild({}).ok());
  for (int t = 0; t < 3; ++t) EXPECT_THAT(HotRows(*manager, t), UnorderedElementsAre()) << t;
}

// Counts the flushes of its lookup counts.
class FlushCountingBackend final : public FakeBackend {
 public:
  using FakeBackend::FakeBackend;
  void FlushLookupCounts() override { ++flushes; }
  int flushes = 0;
};

TEST(SamplingBackendTest, TheFlushOfLookupCountsReachesTheInnerBackend) {
  const std::shared_ptr<const Model> model = test::MakeHotRowTestModel(100, 4, DType::kF32, 3);
  auto manager = test::MakeHotRowManager(model, 2, /*sample_period=*/1);
  auto inner = std::make_unique<FlushCountingBackend>(1);
  FlushCountingBackend* counting = inner.get();
  SamplingBackend backend(std::move(inner), manager.get());
  backend.FlushLookupCounts();  // the CUDA backend's device counters, after the warm-up
  EXPECT_EQ(counting->flushes, 1);
}

}  // namespace
}  // namespace fuserank::engine
