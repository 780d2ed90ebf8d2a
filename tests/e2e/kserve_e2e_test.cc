// ModelInfer on the real server on 127.0.0.1:0: the same scores as Rank bit for bit (and
// Rank against the double-precision reference) from raw and typed contents, for every
// model; top_k and requested outputs; SPEC section 3's errors with Rank's status and
// message; the server keeps scoring after each.
#include <grpcpp/grpcpp.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "bench/kserve/infer_request.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tests/e2e/kserve_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_seed.h"

namespace fuserank {
namespace {

using bench::InferRequestOptions;
using bench::TensorContents;
using inference::ModelInferRequest;
using ::testing::HasSubstr;
using testing::Infer;
using testing::InferReply;
using testing::NamedModel;

class KServeE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new std::vector<NamedModel>(testing::KServeModels());
    auto started = testing::StartKServeServer(*models_, testing::TempDir("kserve_e2e"));
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = started->release();
    channel_ = new std::shared_ptr<grpc::Channel>(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials()));
  }
  static void TearDownTestSuite() {
    delete server_;
    delete channel_;
    delete models_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "the server did not start";
    rank_ = v1::Ranker::NewStub(*channel_);
    infer_ = inference::GRPCInferenceService::NewStub(*channel_);
  }

  // The served name of model i ("" in the config: the spec's name).
  static std::string ServedName(const NamedModel& m) {
    return m.name.empty() ? m.model.spec.name : m.name;
  }
  static v1::RankRequest RankRequestFor(const NamedModel& m, uint64_t seed, int candidates) {
    v1::RankRequest request = testing::RandomRequest(m.model, seed, candidates);
    request.set_model(ServedName(m));
    return request;
  }
  static ModelInferRequest InferFor(const NamedModel& m, const v1::RankRequest& request,
                                    TensorContents contents = TensorContents::kRaw) {
    return bench::ToInferRequest(m.model.spec, request, InferRequestOptions{contents, false});
  }

  // Scores `request` through Rank and through ModelInfer and expects identical answers.
  void ExpectSameAsRank(const NamedModel& m, const v1::RankRequest& request,
                        TensorContents contents) {
    const testing::Reply ranked = testing::Rank(rank_.get(), request);
    ASSERT_TRUE(ranked.status.ok()) << ranked.status.error_message();
    const InferReply inferred = Infer(infer_.get(), InferFor(m, request, contents));
    ASSERT_TRUE(inferred.status.ok()) << inferred.status.error_message();
    EXPECT_EQ(inferred.response.model_name(), ServedName(m));
    EXPECT_EQ(inferred.response.model_version(), ranked.response.model_version());
    EXPECT_EQ(inferred.response.id(), request.request_id());
    const testing::InferOutputs out = testing::ReadOutputs(inferred.response);
    const auto& items = ranked.response.items();
    ASSERT_EQ(out.scores.size(), static_cast<size_t>(items.size()));
    ASSERT_EQ(out.indices.size(), out.scores.size());
    ASSERT_EQ(out.item_ids.size(), out.scores.size());
    for (int i = 0; i < items.size(); ++i) {
      const float rank_score = items[i].score();
      EXPECT_EQ(std::memcmp(&out.scores[i], &rank_score, sizeof(float)), 0)
          << "position " << i << ": ModelInfer " << out.scores[i] << ", Rank " << rank_score;
      EXPECT_EQ(out.indices[i], static_cast<int32_t>(items[i].index())) << "position " << i;
      EXPECT_EQ(out.item_ids[i], items[i].item_id()) << "position " << i;
    }
  }

  static server::Server* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
  static std::vector<NamedModel>* models_;
  std::unique_ptr<v1::Ranker::Stub> rank_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> infer_;
};

server::Server* KServeE2eTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* KServeE2eTest::channel_ = nullptr;
std::vector<NamedModel>* KServeE2eTest::models_ = nullptr;

TEST_F(KServeE2eTest, ScoresEqualRanksBitForBitFromRawAndTypedContents) {
  const uint64_t base = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(base));
  for (const NamedModel& m : *models_) {
    for (uint64_t i = 0; i < 12; ++i) {
      SCOPED_TRACE(absl::StrCat("model ", ServedName(m), ", request ", i));
      const v1::RankRequest request = RankRequestFor(m, base + i, 40);
      testing::ExpectMatchesReference(m.model, request, testing::Rank(rank_.get(), request));
      ExpectSameAsRank(m, request, i % 2 == 0 ? TensorContents::kRaw : TensorContents::kTyped);
      if (HasFailure()) return;
    }
  }
}

TEST_F(KServeE2eTest, TopKKeepsTheBestFirstAsRankDoes) {
  const NamedModel& m = models_->front();
  for (uint32_t top_k : {0u, 1u, 3u, 17u, 100u}) {
    SCOPED_TRACE(absl::StrCat("top_k ", top_k));
    v1::RankRequest request = RankRequestFor(m, 7, 30);
    request.set_top_k(top_k);
    ExpectSameAsRank(m, request, TensorContents::kRaw);
  }
}

TEST_F(KServeE2eTest, AnEmptyModelNameMeansTheDefaultModel) {
  v1::RankRequest request = RankRequestFor(models_->front(), 3, 10);
  request.clear_model();
  ExpectSameAsRank(models_->front(), request, TensorContents::kTyped);
}

TEST_F(KServeE2eTest, RequestedOutputsComeInTheRequestedOrder) {
  const NamedModel& m = models_->front();
  const v1::RankRequest request = RankRequestFor(m, 5, 8);
  ModelInferRequest infer = InferFor(m, request);
  infer.add_outputs()->set_name("item_ids");
  infer.add_outputs()->set_name("scores");
  const InferReply reply = Infer(infer_.get(), infer);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  ASSERT_EQ(reply.response.outputs_size(), 2);
  EXPECT_EQ(reply.response.outputs(0).name(), "item_ids");
  EXPECT_EQ(reply.response.outputs(1).name(), "scores");
  const testing::InferOutputs out = testing::ReadOutputs(reply.response);
  EXPECT_EQ(out.item_ids.size(), out.scores.size());
  EXPECT_TRUE(out.indices.empty());
}

TEST_F(KServeE2eTest, NoCandidatesIsOkWithEmptyOutputs) {
  const NamedModel& m = models_->front();
  v1::RankRequest request = RankRequestFor(m, 9, 5);
  request.clear_candidates();
  const InferReply reply = Infer(infer_.get(), InferFor(m, request));
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  ASSERT_EQ(reply.response.outputs_size(), 3);
  for (const auto& output : reply.response.outputs()) {
    ASSERT_EQ(output.shape_size(), 1);
    EXPECT_EQ(output.shape(0), 0) << output.name();
  }
}

// Rank's message, but for the field its hint names: ModelInfer's is model_name.
TEST_F(KServeE2eTest, AnUnknownModelIsNotFoundWithRanksMessage) {
  v1::RankRequest request = RankRequestFor(models_->front(), 4, 5);
  request.set_model("nope");
  const testing::Reply ranked = testing::Rank(rank_.get(), request);
  const InferReply inferred = Infer(infer_.get(), InferFor(models_->front(), request));
  EXPECT_EQ(ranked.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(inferred.status.error_code(), grpc::StatusCode::NOT_FOUND);
  const std::string loaded =
      "model 'nope' is not loaded; loaded models: ranker_a, concat16, linear_nodense (leave ";
  EXPECT_EQ(ranked.status.error_message(),
            absl::StrCat(loaded, "`model` empty for the default, 'ranker_a')"));
  EXPECT_EQ(inferred.status.error_message(),
            absl::StrCat(loaded, "`model_name` empty for the default, 'ranker_a')"));
}

// Messages name the model as the client addressed it (ranker_a), not as its spec (dot32).
TEST_F(KServeE2eTest, MessagesNameTheModelByItsServedName) {
  const NamedModel& m = models_->front();
  ASSERT_EQ(ServedName(m), "ranker_a");
  ASSERT_EQ(m.model.spec.name, "dot32");
  v1::RankRequest request = RankRequestFor(m, 12, 5);
  testing::AddFeature(request.mutable_user_features(), "nope", {1});
  const testing::Reply ranked = testing::Rank(rank_.get(), request);
  EXPECT_EQ(ranked.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ranked.status.error_message(),
              HasSubstr("]: model 'ranker_a' has no table named 'nope'"));
  request = RankRequestFor(m, 12, 5);
  request.add_user_dense(1.0f);
  const testing::Reply dense = testing::Rank(rank_.get(), request);
  EXPECT_THAT(dense.status.error_message(), HasSubstr("user_dense: model 'ranker_a' takes"));
  for (int i = 0; i < 30; ++i) request.add_user_features();  // refused by the wire scan
  const testing::Reply scanned = testing::Rank(rank_.get(), request);
  EXPECT_THAT(scanned.status.error_message(), HasSubstr("features, but model 'ranker_a' has"));

  ModelInferRequest infer = InferFor(m, RankRequestFor(m, 12, 5));
  infer.mutable_inputs(0)->set_name("nope");
  const InferReply inferred = Infer(infer_.get(), infer);
  EXPECT_EQ(inferred.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(inferred.status.error_message(),
              HasSubstr("nope: model 'ranker_a' has no table named 'nope'"));
}

TEST_F(KServeE2eTest, AVersionNotServedIsNotFoundNamingTheServedOne) {
  const NamedModel& m = models_->front();
  ModelInferRequest request = InferFor(m, RankRequestFor(m, 4, 5));
  request.set_model_version("9");
  const InferReply reply = Infer(infer_.get(), request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(reply.status.error_message(),
              HasSubstr("model 'ranker_a' has no version '9' (serving version 'dot32-v2'"));
  request.set_model_version("dot32-v2");
  EXPECT_TRUE(Infer(infer_.get(), request).status.ok());
}

TEST_F(KServeE2eTest, ARequestOverTheByteLimitIsInvalidArgumentNamingIt) {
  const NamedModel& m = models_->front();
  ModelInferRequest request = InferFor(m, RankRequestFor(m, 4, 5));
  request.set_id(std::string(70000, 'x'));
  v1::RankRequest rank_request = RankRequestFor(m, 4, 5);
  rank_request.set_request_id(std::string(70000, 'x'));
  const InferReply inferred = Infer(infer_.get(), request);
  const testing::Reply ranked = testing::Rank(rank_.get(), rank_request);
  for (const grpc::Status& status : {inferred.status, ranked.status}) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("bytes, more than server.max_request_bytes "
                                                  "(65536)"));
  }
}

struct BadInfer {
  std::string name;
  std::function<void(ModelInferRequest*)> mutate;
  std::string message;
};

void PrintTo(const BadInfer& c, std::ostream* os) { *os << c.name; }

class KServeBadRequestE2eTest : public KServeE2eTest,
                                public ::testing::WithParamInterface<BadInfer> {};

TEST_P(KServeBadRequestE2eTest, IsInvalidArgumentAndTheServerKeepsScoring) {
  const NamedModel& m = models_->front();
  const v1::RankRequest good = RankRequestFor(m, 11, 6);
  ModelInferRequest request = InferFor(m, good, TensorContents::kTyped);
  GetParam().mutate(&request);
  const InferReply bad = Infer(infer_.get(), request);
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << bad.status.error_message();
  EXPECT_THAT(bad.status.error_message(), HasSubstr(GetParam().message));
  ExpectSameAsRank(m, good, TensorContents::kRaw);
}

void SetIds(ModelInferRequest* r, const std::string& name, std::vector<int64_t> ids) {
  for (auto& input : *r->mutable_inputs()) {
    if (input.name() != name) continue;
    input.clear_shape();
    input.add_shape(static_cast<int64_t>(ids.size()));
    input.mutable_contents()->clear_int64_contents();
    for (int64_t id : ids) input.mutable_contents()->add_int64_contents(id);
  }
}

INSTANTIATE_TEST_SUITE_P(
    SectionThree, KServeBadRequestE2eTest,
    ::testing::Values(
        BadInfer{"TooManyCandidates",
                 [](auto* r) { SetIds(r, "item_ids", std::vector<int64_t>(65, 1)); },
                 "item_ids: 65 candidates exceed server.max_candidates (64)"},
        BadInfer{"UnknownInput",
                 [](auto* r) {
                   auto* in = r->add_inputs();
                   in->set_name("item_z");
                   in->set_datatype("INT64");
                   in->add_shape(0);
                 },
                 "item_z: model 'ranker_a' has no table named 'item_z'"},
        BadInfer{"WrongDatatype", [](auto* r) { r->mutable_inputs(0)->set_datatype("INT32"); },
                 "datatype 'INT32', expected INT64"},
        BadInfer{"UnknownOutput", [](auto* r) { r->add_outputs()->set_name("logits"); },
                 "outputs[0]: model 'ranker_a' has no output named 'logits' (outputs: scores, "
                 "indices, item_ids)"},
        // Refused before protobuf parses them (infer_request_scan.h): 30,000 empty inputs
        // would parse into 30,000 tensors.
        BadInfer{"ThirtyThousandEmptyInputs",
                 [](auto* r) {
                   for (int i = 0; i < 30000; ++i) r->add_inputs();
                 },
                 "input tensors, but model 'ranker_a' takes at most"},
        // Triton's classification extension (tritonclient's class_count): no such form.
        BadInfer{"ClassificationOnAnOutput",
                 [](auto* r) {
                   auto* out = r->add_outputs();
                   out->set_name("scores");
                   (*out->mutable_parameters())["classification"].set_int64_param(2);
                 },
                 "outputs[0].parameters.classification: output 'scores' has no classification "
                 "form; fuserank returns scores (FP32) and ids only"},
        BadInfer{"MoreThan64Parameters",
                 [](auto* r) {
                   for (int i = 0; i < 65; ++i) {
                     (*r->mutable_parameters())[absl::StrCat("p", i)].set_bool_param(true);
                   }
                 },
                 "parameters: more than 64 parameters; send fewer"},
        BadInfer{"TopKNotAnInteger",
                 [](auto* r) { (*r->mutable_parameters())["top_k"].set_double_param(2.5); },
                 "parameters.top_k: must be an int64 parameter >= 0"}),
    [](const ::testing::TestParamInfo<BadInfer>& info) { return info.param.name; });

}  // namespace
}  // namespace fuserank
