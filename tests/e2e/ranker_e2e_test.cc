// The real server in-process on 127.0.0.1:0, called over gRPC: scores against the
// double-precision reference, top-K order, concurrent clients, health, reflection, admin,
// metrics. The bad requests of SPEC section 3 are bad_request_e2e_test.cc's; the fixture
// (models, server) is ranker_e2e_util.h.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/ranker_e2e_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::testing {
namespace {

using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST_F(RankerE2eTest, ScoresMatchTheReferenceOnRandomRequests) {
  for (const TestModel& model : *models_) {
    for (uint64_t seed = 1; seed <= 25; ++seed) {
      SCOPED_TRACE(absl::StrCat("model ", model.spec.name, ", request seed ", seed));
      const v1::RankRequest request = RandomRequest(model, seed, 40);
      ExpectMatchesReference(model, request, Rank(stub_.get(), request));
      if (HasFailure()) return;
    }
  }
}

TEST_F(RankerE2eTest, AnEmptyModelFieldMeansTheFirstModel) {
  v1::RankRequest request = GoodDotRequest();
  request.clear_model();
  ExpectMatchesReference(Model("dot32"), request, Rank(stub_.get(), request));
  request.set_model("dot32");
  ExpectMatchesReference(Model("dot32"), request, Rank(stub_.get(), request));
}

TEST_F(RankerE2eTest, TopKKeepsTheBestAndTiesGoToTheLowerIndex) {
  v1::RankRequest request = GoodDotRequest();
  // Candidates 3, 4, 5 repeat 0, 1, 2 under other item ids: equal scores.
  for (int c = 0; c < 3; ++c) {
    v1::Candidate copy = request.candidates(c);
    copy.set_item_id(900 + c);
    *request.add_candidates() = copy;
  }
  const Reply all = Rank(stub_.get(), request);
  ExpectMatchesReference(Model("dot32"), request, all);
  ASSERT_EQ(all.response.items_size(), 6);
  for (int i = 0; i < 6; i += 2) {
    const v1::ScoredItem& first = all.response.items(i);
    const v1::ScoredItem& second = all.response.items(i + 1);
    EXPECT_EQ(first.score(), second.score()) << "identical candidates scored differently";
    EXPECT_EQ(second.index(), first.index() + 3) << "the tie must list the lower index first";
  }
  for (uint32_t k : {1u, 2u, 3u, 5u, 6u, 7u}) {
    request.set_top_k(k);
    const Reply top = Rank(stub_.get(), request);
    ExpectMatchesReference(Model("dot32"), request, top);
    for (int i = 0; i < top.response.items_size(); ++i) {
      EXPECT_EQ(top.response.items(i).index(), all.response.items(i).index()) << "top_k " << k;
    }
  }
}

TEST_F(RankerE2eTest, NoCandidatesIsOkWithAnEmptyList) {
  v1::RankRequest request = GoodDotRequest();
  request.clear_candidates();
  const Reply reply = Rank(stub_.get(), request);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  EXPECT_EQ(reply.response.items_size(), 0);
  EXPECT_EQ(reply.response.model_version(), "dot32-v3");
}

TEST_F(RankerE2eTest, ConcurrentClientsAllScoreRight) {
  std::vector<std::thread> threads;
  std::atomic<int> checked{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto stub = v1::Ranker::NewStub(*channel_);
      for (int i = 0; i < 15; ++i) {
        const TestModel& model = (*models_)[(t + i) % models_->size()];
        const uint64_t seed = 1000 + t * 100 + i;
        SCOPED_TRACE(absl::StrCat("model ", model.spec.name, ", request seed ", seed));
        const v1::RankRequest request = RandomRequest(model, seed, 64);
        ExpectMatchesReference(model, request, Rank(stub.get(), request));
        ++checked;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(checked.load(), 60);
}

TEST_F(RankerE2eTest, HealthIsServing) {
  absl::StatusOr<int> overall = HealthCheck(*channel_, "");
  ASSERT_TRUE(overall.ok()) << overall.status();
  EXPECT_EQ(*overall, 1);  // SERVING
  absl::StatusOr<int> ranker = HealthCheck(*channel_, "fuserank.v1.Ranker");
  ASSERT_TRUE(ranker.ok()) << ranker.status();
  EXPECT_EQ(*ranker, 1);
}

TEST_F(RankerE2eTest, ReflectionListsTheRanker) {
  absl::StatusOr<std::vector<std::string>> services = ReflectionServices(*channel_);
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, ::testing::Contains("fuserank.v1.Ranker"));
  EXPECT_THAT(*services, ::testing::Contains("grpc.health.v1.Health"));
  EXPECT_THAT(*services, ::testing::Not(::testing::Contains("fuserank.v1.Admin")))
      << "Admin belongs on server.admin_listen only";
}

// What grpcurl needs to call a method without a .proto: every listed service, and the
// health messages, described by file_containing_symbol.
TEST_F(RankerE2eTest, ReflectionDescribesEveryListedService) {
  absl::StatusOr<std::vector<std::string>> services = ReflectionServices(*channel_);
  ASSERT_TRUE(services.ok()) << services.status();
  for (const std::string& service : *services) {
    absl::StatusOr<int> files = ReflectionDescribe(*channel_, service);
    ASSERT_TRUE(files.ok()) << files.status();
    EXPECT_GE(*files, 1) << service;
  }
  for (const char* message : {"grpc.health.v1.HealthCheckRequest",
                              "grpc.health.v1.HealthCheckResponse", "fuserank.v1.RankRequest"}) {
    absl::StatusOr<int> files = ReflectionDescribe(*channel_, message);
    EXPECT_TRUE(files.ok()) << files.status();
  }
  EXPECT_EQ(ReflectionDescribe(*channel_, "no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RankerE2eTest, AdminAnswersOnItsOwnPortOnly) {
  ASSERT_NE(server_->admin_port(), 0);
  ASSERT_NE(server_->admin_port(), server_->port());
  auto admin = v1::Admin::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server_->admin_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::GetHotRowsRequest request;
  request.set_model("nodense");
  v1::HotRowsStatus response;
  const grpc::Status status = admin->GetHotRows(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.tables_size(), 3);
  EXPECT_EQ(response.tables(0).table(), "user_p");
  // And not on the public port: there the service does not exist.
  auto public_admin = v1::Admin::NewStub(*channel_);
  grpc::ClientContext public_context;
  const grpc::Status on_public = public_admin->GetHotRows(&public_context, {}, &response);
  EXPECT_EQ(on_public.error_code(), grpc::StatusCode::UNIMPLEMENTED);  // unknown service
}

// The value of the series whose line starts with `series` ("name{labels}"), or -1.
double SeriesValue(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST_F(RankerE2eTest, MetricsAreServedWithEveryFamily) {
  ASSERT_NE(server_->metrics_port(), 0);
  const std::string invalid = R"(fuserank_requests_total{code="INVALID_ARGUMENT",rpc="Rank"})";
  const std::string ok = R"(fuserank_requests_total{code="OK",rpc="Rank"})";
  absl::StatusOr<std::string> before = HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(before.ok()) << before.status();
  v1::RankRequest bad = GoodDotRequest();
  bad.set_user_dense(0, kNaN);
  Rank(stub_.get(), bad);
  Rank(stub_.get(), GoodDotRequest());
  absl::StatusOr<std::string> after = HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(after.ok()) << after.status();
  for (const char* family :
       {"fuserank_requests_total", "fuserank_request_duration_seconds",
        "fuserank_stage_duration_seconds", "fuserank_batch_candidates",
        "fuserank_embedding_cache_lookups_total", "fuserank_hot_rows", "fuserank_hot_rows_version",
        "fuserank_inflight_requests", "fuserank_queue_depth", "fuserank_model_info"}) {
    EXPECT_THAT(*after, HasSubstr(absl::StrCat("# TYPE ", family, " "))) << family;
  }
  for (const char* stage : {"decode", "queue", "lookup", "cross", "dnn", "topk", "encode"}) {
    EXPECT_THAT(*after, HasSubstr(absl::StrCat("fuserank_stage_duration_seconds_count{stage=\"",
                                               stage, "\"}")));
  }
  // isa: the server's own choice (engine/cpu/cpu_simd.h), which its FMA probe made.
  EXPECT_THAT(*after, HasSubstr(R"(fuserank_model_info{device="cpu",model=")"));
  EXPECT_THAT(*after, HasSubstr(R"(fuserank_cpu_isa_info{isa=")"));
  EXPECT_THAT(*after, HasSubstr(R"(",model="dot32",version="dot32-v3"} 1)"));
  EXPECT_EQ(SeriesValue(*after, invalid), SeriesValue(*before, invalid) + 1);
  EXPECT_EQ(SeriesValue(*after, ok), SeriesValue(*before, ok) + 1);
  EXPECT_GE(SeriesValue(*after, "fuserank_inflight_requests"), 0);
}

}  // namespace
}  // namespace fuserank::testing