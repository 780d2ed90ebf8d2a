// Warm-up: the synthetic batch is a valid one-request batch of the model's layout, every
// backend worker runs it, and a backend that scores NaN (weights that overflow, say) is
// refused before the version can serve.
#include "server/model_warmup.h"

#include <limits>
#include <utility>
#include <vector>

#include "engine/batch_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const engine::Model> Model() {
  absl::StatusOr<std::shared_ptr<const engine::Model>> model =
      testing::BuildTestModel(testing::MakeRandomModel(testing::SmallSpec(2, 3, 30, 4), 5));
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

// Scores every candidate `score`, counts the runs of each worker and records each run's
// request sizes.
class FakeBackend : public engine::Backend {
 public:
  FakeBackend(int workers, float score) : runs_(workers, 0), score_(score) {}
  std::string device() const override { return "cpu"; }
  int num_workers() const override { return static_cast<int>(runs_.size()); }
  absl::Status Run(int worker, const engine::Batch& batch, engine::BatchResult* result) override {
    ++runs_[worker];
    EXPECT_TRUE(engine::ValidateBatch(batch).ok()) << engine::ValidateBatch(batch);
    std::vector<int> requests;
    for (int r = 0; r < batch.num_requests(); ++r) {
      requests.push_back(static_cast<int>(batch.candidate_begin[r + 1] - batch.candidate_begin[r]));
      EXPECT_EQ(batch.top_k[r], static_cast<uint32_t>(requests.back())) << "top_k: all";
    }
    seen_.push_back({worker, requests});
    for (int c = 0; c < batch.num_candidates(); ++c) {
      result->items.push_back({static_cast<uint32_t>(c), score_});
    }
    result->result_begin.push_back(static_cast<uint32_t>(result->items.size()));
    return absl::OkStatus();
  }
  void FlushLookupCounts() override { flushed_after_runs_.push_back(runs_); }
  std::vector<int> runs_;
  std::vector<std::vector<int>> flushed_after_runs_;    // runs_ at each flush
  std::vector<std::pair<int, std::vector<int>>> seen_;  // (worker, request sizes) per run
  float score_;
};

// Asks for its own warm-up batches, as the CUDA backend does.
class ShapedBackend final : public FakeBackend {
 public:
  using FakeBackend::FakeBackend;
  std::vector<std::vector<int>> WarmupBatches(int max_batch, int max_request) const override {
    asked_ = {max_batch, max_request};
    return {{3, 2}, {5}, {1, 1, 1}};
  }
  mutable std::pair<int, int> asked_;
};

TEST(ModelWarmupTest, TheSyntheticBatchHasTheModelsLayout) {
  const std::shared_ptr<const engine::Model> model = Model();
  const engine::Batch batch = SyntheticBatch(model, 5);
  EXPECT_EQ(batch.model, model);
  EXPECT_EQ(batch.num_requests(), 1);
  EXPECT_EQ(batch.num_candidates(), 5);
  EXPECT_EQ(batch.top_k, std::vector<uint32_t>{5});
  EXPECT_EQ(batch.user.num_bags(), 2u);
  EXPECT_EQ(batch.item.num_bags(), 5u * 3u);
  EXPECT_EQ(batch.user_dense.size(), 2u);
  EXPECT_EQ(batch.item_dense.size(), 5u * 3u);
  for (int32_t row : batch.item.rows) {
    EXPECT_GE(row, 0);
    EXPECT_LT(row, 30);
  }
}

TEST(ModelWarmupTest, RunsEveryWorker) {
  FakeBackend backend(3, 0.5f);
  ASSERT_TRUE(WarmUpBackend(Model(), &backend, 64, 64).ok());
  for (int runs : backend.runs_) EXPECT_EQ(runs, 2) << "one small and one large batch each";
  ASSERT_EQ(backend.seen_.size(), 6u);
  EXPECT_EQ(backend.seen_[0].second, std::vector<int>{1});
  EXPECT_EQ(backend.seen_[5].second, std::vector<int>{64}) << "the large batch within both bounds";
}

TEST(ModelWarmupTest, RunsTheBackendsOwnBatchesInOrderOnEveryWorker) {
  ShapedBackend backend(2, 0.5f);
  ASSERT_TRUE(WarmUpBackend(Model(), &backend, 512, 100).ok());
  EXPECT_EQ(backend.asked_, (std::pair<int, int>{512, 100}));
  const std::vector<std::pair<int, std::vector<int>>> expected = {
      {0, {3, 2}}, {1, {3, 2}}, {0, {5}}, {1, {5}}, {0, {1, 1, 1}}, {1, {1, 1, 1}}};
  EXPECT_EQ(backend.seen_, expected);
}

TEST(ModelWarmupTest, FlushesTheLookupCountsOnceAfterTheLastBatch) {
  ShapedBackend backend(2, 0.5f);
  ASSERT_TRUE(WarmUpBackend(Model(), &backend, 512, 100).ok());
  // The CUDA backend's device counters reach the manager before StartServing's baseline.
  EXPECT_EQ(backend.flushed_after_runs_, (std::vector<std::vector<int>>{{3, 3}}));
}

TEST(ModelWarmupTest, ASyntheticBatchOfSeveralRequestsIsValid) {
  const std::shared_ptr<const engine::Model> model = Model();
  const engine::Batch batch = SyntheticBatch(model, std::vector<int>{4, 1, 2});
  EXPECT_TRUE(engine::ValidateBatch(batch).ok()) << engine::ValidateBatch(batch);
  EXPECT_EQ(batch.candidate_begin, (std::vector<uint32_t>{0, 4, 5, 7}));
  EXPECT_EQ(batch.top_k, (std::vector<uint32_t>{4, 1, 2}));
  EXPECT_EQ(batch.user.num_bags(), 3u * 2u);
  EXPECT_EQ(batch.user_dense.size(), 3u * 2u);
  EXPECT_EQ(batch.item.num_bags(), 7u * 3u);
}

TEST(ModelWarmupTest, RefusesScoresOutsideZeroToOne) {
  for (float score : {std::numeric_limits<float>::quiet_NaN(), 1.5f, -0.1f}) {
    FakeBackend backend(1, score);
    const absl::Status status = WarmUpBackend(Model(), &backend, 64, 64);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << score;
    EXPECT_THAT(status.message(), HasSubstr("warm-up scores are not in [0, 1]"));
  }
}

}  // namespace
}  // namespace fuserank::server
