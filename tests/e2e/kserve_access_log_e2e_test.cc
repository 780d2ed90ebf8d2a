// ModelInfer's access-log line on the real server in-process on 127.0.0.1:0
// (logging.access_log_sample: 1): the candidates a call held once its request was parsed,
// for a call refused after the parse too (it said candidates=0 until the decode finished),
// and 0 for one refused before the parse; the model named is the one that served the call
// (Rank's line too). The server's stdout is captured while it runs.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/kserve/infer_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/kserve_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/e2e/stdout_capture_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

class KServeAccessLogE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine::ModelSpec spec = testing::SmallSpec(2, 2, 200, 8);
    spec.name = "spec_name";
    model_ = testing::MakeRandomModel(spec, 43);
    absl::StatusOr<std::string> path =
        testing::WriteTestModel(model_, testing::TempDir("kserve_access_log"));
    ASSERT_TRUE(path.ok()) << path.status();
    const std::string yaml =
        absl::StrCat("logging: {access_log_sample: 1}\n", testing::E2eServerYaml(""),
                     "  - {name: ctr, path: \"", *path, "\"}\n");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "kserve_access_log.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<server::Server>> started = server::Server::Start(*config);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    infer_ = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials()));
  }

  // A request for model 'ctr' with id `id`; `candidates` gets how many it holds.
  inference::ModelInferRequest Request(const std::string& id, int* candidates) const {
    v1::RankRequest rank = testing::RandomRequest(model_, 5, 40);
    rank.set_request_id(id);
    *candidates = rank.candidates_size();
    inference::ModelInferRequest request = bench::ToInferRequest(
        model_.spec, rank, bench::InferRequestOptions{bench::TensorContents::kRaw, false});
    request.set_model_name("ctr");
    return request;
  }

  // The access-log line of the call with id `id` among `lines`.
  static std::string LineOf(const std::vector<std::string>& lines, const std::string& id) {
    for (const std::string& line : lines) {
      if (absl::StrContains(line, absl::StrCat("request_id='", id, "'"))) return line;
    }
    return "";
  }

  testing::TestModel model_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> infer_;
};

TEST_F(KServeAccessLogE2eTest, ACallRefusedAfterItsParseLogsItsCandidates) {
  ASSERT_NE(server_, nullptr);
  testing::StdoutCapture log(testing::TempDir("kserve_access_log_capture") + "/log.txt");
  int n = 0;
  const inference::ModelInferRequest ok = Request("ok", &n);
  ASSERT_TRUE(testing::Infer(infer_.get(), ok).status.ok());

  inference::ModelInferRequest bad_top_k = Request("bad-top-k", &n);  // refused by the decode
  (*bad_top_k.mutable_parameters())["top_k"].set_double_param(2.5);
  EXPECT_EQ(testing::Infer(infer_.get(), bad_top_k).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  inference::ModelInferRequest bad_output = Request("bad-output", &n);  // before the decode
  bad_output.add_outputs()->set_name("logits");
  EXPECT_EQ(testing::Infer(infer_.get(), bad_output).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  inference::ModelInferRequest unknown = Request("unknown-input", &n);  // before the parse
  unknown.mutable_inputs(0)->set_name("nope");
  const grpc::Status refused = testing::Infer(infer_.get(), unknown).status;
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The model as the client named it, not as its spec does.
  EXPECT_THAT(refused.error_message(), HasSubstr("nope: model 'ctr' has no table named 'nope'"));

  ASSERT_GT(n, 0);
  server_.reset();  // every line is written
  const std::vector<std::string> lines = testing::LinesFrom(log.Stop(), "infer request_id=");
  const std::string candidates = absl::StrCat("candidates=", n, " ");
  EXPECT_THAT(LineOf(lines, "ok"), HasSubstr(absl::StrCat("model='ctr' ", candidates, "code=OK")));
  EXPECT_THAT(LineOf(lines, "bad-top-k"),
              HasSubstr(absl::StrCat(candidates, "code=INVALID_ARGUMENT")));
  EXPECT_THAT(LineOf(lines, "bad-output"),
              HasSubstr(absl::StrCat(candidates, "code=INVALID_ARGUMENT")));
  // Refused before the parse: neither its id nor its candidates were read.
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[3], HasSubstr("request_id='' model='ctr' candidates=0 code=INVALID_ARGUMENT"));
}

// A request that leaves the model empty is served by the default model: its line names
// that model, on both protocols (it said model='').
TEST_F(KServeAccessLogE2eTest, ALineNamesTheModelThatServedIt) {
  ASSERT_NE(server_, nullptr);
  testing::StdoutCapture log(testing::TempDir("kserve_access_log_default") + "/log.txt");
  int n = 0;
  inference::ModelInferRequest infer = Request("infer-default", &n);
  infer.set_model_name("");
  ASSERT_TRUE(testing::Infer(infer_.get(), infer).status.ok());
  v1::RankRequest rank = testing::RandomRequest(model_, 5, 40);
  rank.set_request_id("rank-default");
  rank.set_model("");
  const auto ranker = v1::Ranker::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(testing::Rank(ranker.get(), rank).status.ok());
  rank.set_model("nope");
  EXPECT_EQ(testing::Rank(ranker.get(), rank).status.error_code(), grpc::StatusCode::NOT_FOUND);

  server_.reset();  // every line is written
  const std::string text = log.Stop();
  EXPECT_THAT(LineOf(testing::LinesFrom(text, "infer request_id="), "infer-default"),
              HasSubstr("model='ctr' "));
  const std::vector<std::string> lines = testing::LinesFrom(text, "rank request_id=");
  EXPECT_THAT(LineOf(lines, "rank-default"), HasSubstr("model='ctr' "));
  // No model of that name: the name as the request gave it (refused before its id is read).
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[1],
              HasSubstr("request_id='' model='nope' candidates=0 top_k=0 code=NOT_FOUND"));
}

}  // namespace
}  // namespace fuserank
