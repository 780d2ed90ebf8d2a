// TensorDecoder against RequestDecoder: the v2 tensors of a RankRequest decode into the
// same engine::Batch, bit for bit, from raw and from typed contents, after other requests,
// for seeded random requests of every table kind; views are read in place.
#include "server/tensor_decoder.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "bench/kserve/infer_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/request_decoder.h"
#include "tests/e2e/reference_util.h"
#include "tests/engine/alloc_counter_util.h"
#include "tests/server/infer_test_util.h"
#include "tests/testing/test_seed.h"

namespace fuserank::server {
namespace {

using bench::InferRequestOptions;
using bench::TensorContents;
using ::testing::ElementsAre;

class TensorDecoderTest : public ::testing::TestWithParam<TensorContents> {
 protected:
  TensorDecoderTest()
      : test_model_(testing::InferTestModel()),
        model_(testing::BuildInferTestModel()),
        rank_(model_, DecodeLimits{8, 4}),
        infer_(*model_, DecodeLimits{8, 4}) {}

  InferRequestOptions Options(bool every_table = true) const { return {GetParam(), every_table}; }

  // Decodes `request` both ways into copies of `base` and expects the same batch.
  void ExpectSameAsRank(const v1::RankRequest& request, const engine::Batch& base,
                        bool every_table) {
    engine::Batch from_rank = base;
    engine::Batch from_infer = base;
    const absl::Status ranked = rank_.Append(request, &from_rank);
    ASSERT_TRUE(ranked.ok()) << ranked;
    const inference::ModelInferRequest infer =
        bench::ToInferRequest(test_model_.spec, request, Options(every_table));
    InferRequestInfo info;
    const absl::Status decoded = infer_.Append(infer, model_, &from_infer, &info);
    ASSERT_TRUE(decoded.ok()) << decoded;
    testing::ExpectSameBatch(from_rank, from_infer);
    ASSERT_EQ(info.num_candidates, request.candidates_size());
    for (int c = 0; c < info.num_candidates; ++c) {
      EXPECT_EQ(info.item_ids[c], request.candidates(c).item_id()) << "candidate " << c;
    }
  }

  testing::TestModel test_model_;
  std::shared_ptr<const engine::Model> model_;
  RequestDecoder rank_;
  TensorDecoder infer_;
};

TEST_P(TensorDecoderTest, DecodesTheGoodRequestAsRankDoes) {
  ExpectSameAsRank(testing::GoodRankRequest(), engine::Batch(), true);
  ExpectSameAsRank(testing::GoodRankRequest(), engine::Batch(), false);
}

TEST_P(TensorDecoderTest, DecodesMultiHotWeightedAndMissingBagsInTableOrder) {
  engine::Batch batch;
  InferRequestInfo info;
  const auto request =
      bench::ToInferRequest(test_model_.spec, testing::GoodRankRequest(), Options());
  ASSERT_TRUE(infer_.Append(request, model_, &batch, &info).ok());
  EXPECT_EQ(batch.model, model_);
  EXPECT_THAT(batch.candidate_begin, ElementsAre(0u, 2u));
  EXPECT_THAT(batch.top_k, ElementsAre(2u));
  EXPECT_THAT(batch.user.bag_begin, ElementsAre(0u, 3u, 5u));
  EXPECT_THAT(batch.user.rows, ElementsAre(7, 7, 99, 3, 49));
  EXPECT_THAT(batch.user.weights, ElementsAre(0.5f, 2.0f, 1.0f, 1.0f, 1.0f));
  EXPECT_THAT(batch.item.bag_begin, ElementsAre(0u, 1u, 3u, 3u, 4u));
  EXPECT_THAT(batch.item.rows, ElementsAre(5, 9, 0, 4));
  EXPECT_THAT(batch.item.weights, ElementsAre(1.0f, 0.25f, 0.75f, 1.0f));
  EXPECT_THAT(batch.user_dense, ElementsAre(1.0f, -2.0f));
  EXPECT_THAT(batch.item_dense, ElementsAre(0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f));
  EXPECT_THAT(std::vector<int64_t>({info.item_ids[0], info.item_ids[1]}), ElementsAre(1000, 1001));
}

TEST_P(TensorDecoderTest, AppendsAfterRequestsOfEitherDecoder) {
  engine::Batch base;
  ASSERT_TRUE(rank_.Append(testing::GoodRankRequest(), &base).ok());
  InferRequestInfo info;
  const auto first = bench::ToInferRequest(test_model_.spec, testing::GoodRankRequest(), Options());
  ASSERT_TRUE(infer_.Append(first, model_, &base, &info).ok());
  v1::RankRequest second = testing::GoodRankRequest();
  second.set_top_k(1);
  ExpectSameAsRank(second, base, true);
}

TEST_P(TensorDecoderTest, SeededRandomRequestsDecodeAsRankDoes) {
  const uint64_t base_seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(base_seed));
  // Limits wide enough for RandomRequest (up to 4 ids a bag, up to 40 candidates).
  rank_ = RequestDecoder(model_, DecodeLimits{64, 8});
  infer_ = TensorDecoder(*model_, DecodeLimits{64, 8});
  for (uint64_t i = 0; i < 50; ++i) {
    const uint64_t seed = base_seed + i;
    SCOPED_TRACE(absl::StrCat("request ", i, " (seed ", seed, ")"));
    v1::RankRequest request = testing::RandomRequest(test_model_, seed, 40);
    // RandomRequest may send ids past an `oov: reject` table's rows; keep them in range.
    for (auto& candidate : *request.mutable_candidates()) {
      for (auto& feature : *candidate.mutable_features()) {
        if (feature.name() == "item_1") {
          for (auto& id : *feature.mutable_ids()) id = ((id % 10) + 10) % 10;
        }
      }
    }
    for (auto& feature : *request.mutable_user_features()) {
      if (feature.name() == "user_1") {
        for (auto& id : *feature.mutable_ids()) id = ((id % 50) + 50) % 50;
      }
    }
    ExpectSameAsRank(request, engine::Batch(), i % 2 == 0);
    if (HasFailure()) return;
  }
}

TEST_P(TensorDecoderTest, NoCandidatesIsARequestWithNoCandidates) {
  v1::RankRequest request = testing::GoodRankRequest();
  request.clear_candidates();
  ExpectSameAsRank(request, engine::Batch(), true);
  ExpectSameAsRank(request, engine::Batch(), false);
}

TEST_P(TensorDecoderTest, TopKParameterMeansWhatRankRequestTopKMeans) {
  for (uint32_t top_k : {0u, 1u, 2u, 3u, 1000u}) {
    SCOPED_TRACE(absl::StrCat("top_k ", top_k));
    v1::RankRequest request = testing::GoodRankRequest();
    request.set_top_k(top_k);
    ExpectSameAsRank(request, engine::Batch(), true);
  }
  engine::Batch batch;
  InferRequestInfo info;
  auto request = bench::ToInferRequest(test_model_.spec, testing::GoodRankRequest(), Options());
  (*request.mutable_parameters())["top_k"].set_uint64_param(uint64_t{1} << 40);
  ASSERT_TRUE(infer_.Append(request, model_, &batch, &info).ok());
  EXPECT_THAT(batch.top_k, ElementsAre(2u));
}

TEST_P(TensorDecoderTest, ABatchOfAnotherModelIsAnInternalError) {
  engine::Batch batch;
  batch.model = testing::BuildInferTestModel();
  InferRequestInfo info;
  const auto request =
      bench::ToInferRequest(test_model_.spec, testing::GoodRankRequest(), Options());
  EXPECT_EQ(infer_.Append(request, model_, &batch, &info).code(), absl::StatusCode::kInternal);
}

TEST_P(TensorDecoderTest, ViewsPointIntoTheRequest) {
  const auto request =
      bench::ToInferRequest(test_model_.spec, testing::GoodRankRequest(), Options());
  engine::Batch batch;
  InferRequestInfo info;
  ASSERT_TRUE(infer_.Append(request, model_, &batch, &info).ok());
  const int last = request.inputs_size() - 1;  // item_ids
  ASSERT_EQ(request.inputs(last).name(), "item_ids");
  const char* in_request =
      GetParam() == TensorContents::kRaw
          ? request.raw_input_contents(last).data()
          : reinterpret_cast<const char*>(request.inputs(last).contents().int64_contents().data());
  EXPECT_EQ(info.item_ids.bytes(), in_request) << "item_ids was copied, not viewed";
}

TEST_P(TensorDecoderTest, AppendAllocatesNothingOnceTheBatchHasGrown) {
  const auto request =
      bench::ToInferRequest(test_model_.spec, testing::GoodRankRequest(), Options());
  engine::Batch batch;
  InferRequestInfo info;
  ASSERT_TRUE(infer_.Append(request, model_, &batch, &info).ok());  // grows the buffers
  batch.Clear();
  int64_t allocations = 0;
  {
    engine::test::ScopedAllocationCounter counter;
    const absl::Status status = infer_.Append(request, model_, &batch, &info);
    allocations = counter.count();
    EXPECT_TRUE(status.ok()) << status;
  }
  EXPECT_EQ(allocations, 0);
}

INSTANTIATE_TEST_SUITE_P(BothContentKinds, TensorDecoderTest,
                         ::testing::Values(TensorContents::kRaw, TensorContents::kTyped),
                         [](const ::testing::TestParamInfo<TensorContents>& info) {
                           return info.param == TensorContents::kRaw ? "Raw" : "Typed";
                         });

}  // namespace
}  // namespace fuserank::server
