// Warm-up: the synthetic batch is a valid one-request batch of the model's layout, every
// backend worker runs it, and a backend that scores NaN (weights that overflow, say) is
// refused before the version can serve.
#include "server/model_warmup.h"

#include <limits>
#include <vector>

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

// Scores every candidate `score` and counts the runs of each worker.
class FakeBackend : public engine::Backend {
 public:
  FakeBackend(int workers, float score) : runs_(workers, 0), score_(score) {}
  std::string device() const override { return "cpu"; }
  int num_workers() const override { return static_cast<int>(runs_.size()); }
  absl::Status Run(int worker, const engine::Batch& batch, engine::BatchResult* result) override {
    ++runs_[worker];
    for (int c = 0; c < batch.num_candidates(); ++c) {
      result->items.push_back({static_cast<uint32_t>(c), score_});
    }
    result->result_begin.push_back(static_cast<uint32_t>(result->items.size()));
    return absl::OkStatus();
  }
  std::vector<int> runs_;
  float score_;
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
  ASSERT_TRUE(WarmUpBackend(Model(), &backend, 64).ok());
  for (int runs : backend.runs_) EXPECT_EQ(runs, 2) << "one small and one large batch each";
}

TEST(ModelWarmupTest, RefusesScoresOutsideZeroToOne) {
  for (float score : {std::numeric_limits<float>::quiet_NaN(), 1.5f, -0.1f}) {
    FakeBackend backend(1, score);
    const absl::Status status = WarmUpBackend(Model(), &backend, 64);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << score;
    EXPECT_THAT(status.message(), HasSubstr("warm-up scores are not in [0, 1]"));
  }
}

}  // namespace
}  // namespace fuserank::server
