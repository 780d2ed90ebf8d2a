// The CPU engine's behaviour around the scores: top-K prefixes and ties, stage timings,
// empty batches, workers out of range, batches that skipped validation, the thread split
// of large requests, and no heap allocation in Run() after warm-up.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_simd.h"
#include "gtest/gtest.h"
#include "tests/engine/alloc_counter_util.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using fuserank::testing::TestModel;
using test::BuildVariantModel;
using test::MakeBatch;
using test::RandomRequest;
using test::RefRequest;
using test::RequestShape;
using test::ScoresByIndex;
using test::Variant;
using test::VariantSpec;

constexpr double kTolerance = 1e-5;

class CpuBackendFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(seed_);
    absl::StatusOr<std::shared_ptr<const Model>> model = BuildVariantModel(
        VariantSpec(Interaction::kDot, DType::kF32, Variant::kFull, rng), seed_, rng, &test_model_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
  }

  std::vector<RefRequest> RandomRequests(std::vector<int> sizes) {
    std::mt19937_64 rng(seed_ + 1);
    std::vector<RefRequest> requests;
    for (int size : sizes) {
      RequestShape shape;
      shape.candidates = size;
      requests.push_back(RandomRequest(test_model_.spec, shape, rng));
    }
    return requests;
  }

  const uint64_t seed_ = 77;
  TestModel test_model_;
  std::shared_ptr<const Model> model_;
};

TEST_F(CpuBackendFixture, TopKIsThePrefixOfTheFullRanking) {
  std::vector<RefRequest> requests = RandomRequests({20, 20, 20, 1, 130});
  const Batch all = MakeBatch(model_, requests);
  requests[0].top_k = 1;
  requests[1].top_k = 5;
  requests[2].top_k = 20;
  requests[3].top_k = 1;
  requests[4].top_k = 1000;  // more than the candidates: all
  const Batch some = MakeBatch(model_, requests);
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  BatchResult full, top;
  ASSERT_TRUE(backend->Run(0, all, &full).ok());
  ASSERT_TRUE(backend->Run(0, some, &top).ok());
  ASSERT_EQ(top.result_begin, (std::vector<uint32_t>{0, 1, 6, 26, 27, 157}));
  for (int r = 0; r < 5; ++r) {
    for (uint32_t i = 0; i < top.result_begin[r + 1] - top.result_begin[r]; ++i) {
      EXPECT_EQ(top.items[top.result_begin[r] + i].index,
                full.items[full.result_begin[r] + i].index);
      EXPECT_EQ(top.items[top.result_begin[r] + i].score,
                full.items[full.result_begin[r] + i].score);
    }
  }
}

TEST_F(CpuBackendFixture, EqualScoresRankByLowerIndex) {
  std::vector<RefRequest> requests = RandomRequests({6});
  for (auto& candidate : requests[0].candidates) candidate = requests[0].candidates[0];
  requests[0].candidates[3].dense[0] += 0.5f;  // one candidate differs
  requests[0].top_k = 4;
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  BatchResult result;
  ASSERT_TRUE(backend->Run(0, MakeBatch(model_, requests), &result).ok());
  ASSERT_EQ(result.items.size(), 4u);
  std::vector<ScoredIndex> tied;  // the five equal candidates, in ranking order
  for (const ScoredIndex& item : result.items) {
    if (item.index != 3) tied.push_back(item);
  }
  ASSERT_GE(tied.size(), 3u);
  for (size_t i = 0; i < tied.size(); ++i) {
    EXPECT_EQ(tied[i].index, i < 3 ? i : i + 1) << "equal scores must rank by index";
    EXPECT_EQ(tied[i].score, tied[0].score);
  }
}

TEST_F(CpuBackendFixture, FillsStagesAndDevice) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  EXPECT_EQ(backend->device(), "cpu");
  EXPECT_EQ(backend->num_workers(), 4);
  BatchResult result;
  ASSERT_TRUE(backend->Run(3, MakeBatch(model_, RandomRequests({200})), &result).ok());
  EXPECT_GT(result.stages.lookup, 0.0);
  EXPECT_GT(result.stages.cross, 0.0);
  EXPECT_GT(result.stages.dnn, 0.0);
  EXPECT_GE(result.stages.topk, 0.0);
}

TEST_F(CpuBackendFixture, EmptyBatchGivesEmptyResult) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  BatchResult result;
  Batch batch;
  batch.model = model_;
  ASSERT_TRUE(backend->Run(0, batch, &result).ok());
  EXPECT_EQ(result.result_begin, std::vector<uint32_t>{0});
  EXPECT_TRUE(result.items.empty());
}

TEST_F(CpuBackendFixture, RefusesAWorkerOutOfRange) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  const Batch good = MakeBatch(model_, RandomRequests({3, 2}));
  BatchResult result;
  EXPECT_EQ(backend->Run(4, good, &result).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->Run(-1, good, &result).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend->Run(0, good, &result).ok());
}

// Malformed batches are refused where they enter the engine (batch_validation_test.cc);
// Run() re-checks only sizes, and a batch whose sizes disagree is a broken invariant.
TEST_F(CpuBackendFixture, AbortsOnABatchThatSkippedValidation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  Batch bad = MakeBatch(model_, RandomRequests({3, 2}));
  bad.item_dense.pop_back();
  BatchResult result;
  EXPECT_DEATH(static_cast<void>(backend->Run(0, bad, &result)), "the batch was not validated");
  bad = MakeBatch(model_, RandomRequests({3, 2}));
  bad.top_k.pop_back();
  EXPECT_DEATH(static_cast<void>(backend->Run(0, bad, &result)), "the batch was not validated");
}

TEST_F(CpuBackendFixture, ThreadsSplitFewLargeRequestsByTiles) {
  for (std::vector<int> sizes : {std::vector<int>{300}, std::vector<int>{130, 70, 5}}) {
    const std::vector<RefRequest> requests = RandomRequests(sizes);
    const Batch batch = MakeBatch(model_, requests);
    for (int threads : {2, 3}) {
      BackendOptions options;
      options.workers = 1;
      options.cpu_threads = threads;
      std::unique_ptr<Backend> backend = CreateCpuBackend(model_, options);
      BatchResult result;
      const auto scores = ScoresByIndex(*backend, 0, batch, result);
      for (size_t r = 0; r < requests.size(); ++r) {
        for (size_t c = 0; c < requests[r].candidates.size(); ++c) {
          ASSERT_NEAR(scores[r][c], test::ReferenceScore(test_model_, requests[r], c), kTolerance)
              << "threads " << threads << " request " << r << " candidate " << c;
        }
      }
    }
  }
}

TEST_F(CpuBackendFixture, RunDoesNotAllocateAfterWarmUp) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "threads=" << threads);
    BackendOptions options;
    options.workers = 1;
    options.cpu_threads = threads;
    std::unique_ptr<Backend> backend = CreateCpuBackend(model_, options);
    const Batch large = MakeBatch(model_, RandomRequests({300, 16, 1, 70}));
    const Batch small = MakeBatch(model_, RandomRequests({16}));
    BatchResult result;
    ASSERT_TRUE(backend->Run(0, large, &result).ok());  // warm-up: sizes every buffer
    test::ScopedAllocationCounter counter;
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(backend->Run(0, small, &result).ok());
      ASSERT_TRUE(backend->Run(0, large, &result).ok());
    }
    EXPECT_EQ(counter.count(), 0);
  }
}

}  // namespace
}  // namespace fuserank::engine
