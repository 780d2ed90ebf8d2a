// The hot-row Admin methods through the real server on 127.0.0.1: SetHotRows / GetHotRows
// round trips, version + 1 per swap, refused calls (unknown table or model, over
// capacity, a table twice, an id an `oov: reject` table refuses) that change nothing and
// name the model as it is served,
// RebuildHotRows from observed traffic (cache.policy: frequency) and refused for static,
// hits counted in GetHotRows and on /metrics, requests counted per method, and hot sets
// that survive a ReloadModel.
#include <grpcpp/grpcpp.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/hot_rows_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using testing::AdminReply;
using ::testing::AllOf;
using testing::FindTable;
using ::testing::HasSubstr;
using testing::HotRowsAdmin;
using testing::SeriesValue;

constexpr int kCapacity = 16;
constexpr int kRows = 200;

// user_0, user_1, item_0, item_1 (oov: reject) of 200 rows.
testing::TestModel HotModel() {
  engine::ModelSpec spec = testing::SmallSpec(2, 2, kRows, 8);
  spec.name = "hot";
  spec.version = "h1";
  spec.weights_path = "hot.safetensors";
  spec.tables[3].oov = engine::Oov::kReject;
  return testing::MakeRandomModel(spec, 31);
}

// 32 candidates whose item_0 ids are one of 0..3 nine times in ten, else any row.
v1::RankRequest SkewedRequest(std::mt19937_64& rng) {
  v1::RankRequest request;
  v1::Feature* user = request.add_user_features();
  user->set_name("user_0");
  user->add_ids(static_cast<int64_t>(rng() % kRows));
  request.add_user_dense(0.25f);
  request.add_user_dense(-0.5f);
  for (int c = 0; c < 32; ++c) {
    v1::Candidate* candidate = request.add_candidates();
    candidate->set_item_id(c);
    v1::Feature* item = candidate->add_features();
    item->set_name("item_0");
    item->add_ids(rng() % 10 < 9 ? static_cast<int64_t>(rng() % 4)
                                 : static_cast<int64_t>(rng() % kRows));
    for (float d : {0.1f, 0.2f, 0.3f}) candidate->add_dense(d);
  }
  return request;
}

class HotRowsE2eTest : public ::testing::Test {
 protected:
  // `second_as`: the name the second model (spec name "second") is served under; "" its own.
  void Start(const std::string& policy, const std::string& second_as = "") {
    dir_ = testing::TempDir(absl::StrCat(
        "hot_rows_e2e_", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    absl::StatusOr<std::string> hot = testing::WriteTestModel(HotModel(), dir_ + "/hot");
    ASSERT_TRUE(hot.ok()) << hot.status();
    hot_path_ = *hot;
    engine::ModelSpec second = testing::SmallSpec(1, 1, 50, 4);
    second.name = "second";
    second.weights_path = "second.safetensors";
    absl::StatusOr<std::string> second_path =
        testing::WriteTestModel(testing::MakeRandomModel(second, 32), dir_ + "/second");
    ASSERT_TRUE(second_path.ok()) << second_path.status();
    const std::string yaml =
        absl::StrCat(R"(
server:
  listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:0"
  metrics_listen: "127.0.0.1:0"
  shutdown_grace_seconds: 2
engine: {device: cpu, streams: 2, max_batch_wait_us: 0}
cache: {hot_rows_per_table: )",
                     kCapacity, ", policy: ", policy, R"(, rebuild_interval_seconds: 3600}
model: {watch_interval_seconds: 0}
models:
  - {path: ")",
                     hot_path_, R"(", default: true}
  - {)",
                     second_as.empty() ? "" : absl::StrCat("name: ", second_as, ", "), R"(path: ")",
                     *second_path, R"("}
)");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "hot_rows_e2e.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<server::Server>> started = server::Server::Start(*config);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    admin_ = std::make_unique<HotRowsAdmin>(server_->admin_port());
    ranker_ = v1::Ranker::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                      grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // Sends `n` skewed requests; every one must succeed.
  void SendTraffic(int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < n; ++i) {
      const testing::Reply reply = testing::Rank(ranker_.get(), SkewedRequest(rng));
      ASSERT_TRUE(reply.status.ok()) << "seed " << seed << ": " << reply.status.error_message();
    }
  }

  std::string Scrape() {
    absl::StatusOr<std::string> text = testing::HttpGet(server_->metrics_port(), "/metrics");
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  // GetHotRows of every table of the default model, which must succeed.
  v1::HotRowsStatus Current() {
    const AdminReply reply = admin_->Get();
    EXPECT_TRUE(reply.status.ok()) << reply.status.error_message();
    return reply.response;
  }

  std::string dir_;
  std::string hot_path_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<HotRowsAdmin> admin_;
  std::unique_ptr<v1::Ranker::Stub> ranker_;
};

TEST_F(HotRowsE2eTest, SetThenGetRoundTripsAndEachSwapAddsOne) {
  Start("static");
  v1::HotRowsStatus status = Current();
  EXPECT_EQ(status.version(), 0u);
  ASSERT_EQ(status.tables_size(), 4);
  for (const char* table : {"user_0", "user_1", "item_0", "item_1"}) {
    const v1::TableHotRowsStatus* t = FindTable(status, table);
    ASSERT_NE(t, nullptr) << table;
    EXPECT_EQ(t->hot_rows(), 0u);
    EXPECT_EQ(t->capacity(), static_cast<uint32_t>(kCapacity));
  }
  EXPECT_EQ(status.tables(0).table(), "user_0") << "all tables, in spec order";

  // 203 and -197 map to row 3 (oov: modulo): 4 rows.
  AdminReply set = admin_->Set({{"item_0", {3, 1, 203, 7, -197, 9}}, {"user_1", {5}}});
  ASSERT_TRUE(set.status.ok()) << set.status.error_message();
  EXPECT_EQ(set.response.version(), 1u);
  ASSERT_EQ(set.response.tables_size(), 2) << "the listed tables, in call order";
  EXPECT_EQ(set.response.tables(0).table(), "item_0");
  EXPECT_EQ(set.response.tables(0).hot_rows(), 4u);
  EXPECT_EQ(set.response.tables(1).table(), "user_1");
  EXPECT_EQ(set.response.tables(1).hot_rows(), 1u);

  AdminReply get = admin_->Get({"user_1", "item_0"});
  ASSERT_TRUE(get.status.ok()) << get.status.error_message();
  EXPECT_EQ(get.response.version(), 1u);
  ASSERT_EQ(get.response.tables_size(), 2);
  EXPECT_EQ(get.response.tables(0).table(), "user_1");
  EXPECT_EQ(get.response.tables(0).hot_rows(), 1u);
  EXPECT_EQ(get.response.tables(1).hot_rows(), 4u);

  // A second swap replaces only the tables it lists.
  set = admin_->Set({{"item_0", {}}});
  ASSERT_TRUE(set.status.ok()) << set.status.error_message();
  EXPECT_EQ(set.response.version(), 2u);
  status = Current();
  EXPECT_EQ(status.version(), 2u);
  EXPECT_EQ(FindTable(status, "item_0")->hot_rows(), 0u);
  EXPECT_EQ(FindTable(status, "user_1")->hot_rows(), 1u);

  // Exactly the capacity fits.
  std::vector<int64_t> full;
  for (int i = 0; i < kCapacity; ++i) full.push_back(i * 11);
  set = admin_->Set({{"item_1", full}});
  ASSERT_TRUE(set.status.ok()) << set.status.error_message();
  EXPECT_EQ(set.response.version(), 3u);
  EXPECT_EQ(set.response.tables(0).hot_rows(), static_cast<uint32_t>(kCapacity));

  // An empty call changes nothing.
  set = admin_->Set({});
  ASSERT_TRUE(set.status.ok()) << set.status.error_message();
  EXPECT_EQ(set.response.version(), 3u);
}

struct Refused {
  std::string name;
  testing::TableIdList tables;
  std::string model;
  grpc::StatusCode code;
  std::string message;  // a piece of it
};

TEST_F(HotRowsE2eTest, RefusedSwapsChangeNeitherTheVersionNorTheSets) {
  Start("static");
  ASSERT_TRUE(admin_->Set({{"item_0", {1, 2, 3, 4, 5}}, {"user_0", {7}}}).status.ok());
  std::vector<int64_t> too_many;
  for (int i = 0; i <= kCapacity; ++i) too_many.push_back(i);
  const std::vector<Refused> refused = {
      {"unknown table",
       {{"nope", {1}}},
       "",
       grpc::StatusCode::NOT_FOUND,
       "its tables: user_0, user_1, item_0, item_1"},
      {"unknown table after a good one",
       {{"item_0", {9}}, {"nope", {1}}},
       "",
       grpc::StatusCode::NOT_FOUND,
       "'nope'"},
      {"over capacity",
       {{"item_0", too_many}},
       "",
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat(kCapacity)},
      {"a table twice",
       {{"item_0", {1}}, {"item_0", {2}}},
       "",
       grpc::StatusCode::INVALID_ARGUMENT,
       "twice"},
      {"an id an oov: reject table refuses",
       {{"user_0", {8}}, {"item_1", {kRows}}},
       "",
       grpc::StatusCode::INVALID_ARGUMENT,
       "item_1"},
      {"unknown model",
       {{"item_0", {1}}},
       "nope",
       grpc::StatusCode::NOT_FOUND,
       "loaded models: hot, second"},
  };
  for (const Refused& r : refused) {
    SCOPED_TRACE(r.name);
    const AdminReply reply = admin_->Set(r.tables, r.model);
    EXPECT_EQ(reply.status.error_code(), r.code) << reply.status.error_message();
    EXPECT_THAT(reply.status.error_message(), HasSubstr(r.message));
    const v1::HotRowsStatus now = Current();
    EXPECT_EQ(now.version(), 1u);
    EXPECT_EQ(FindTable(now, "item_0")->hot_rows(), 5u);
    EXPECT_EQ(FindTable(now, "user_0")->hot_rows(), 1u);
    EXPECT_EQ(FindTable(now, "item_1")->hot_rows(), 0u);
  }
  EXPECT_EQ(admin_->Get({"nope"}).status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(admin_->Get({}, "nope").status.error_code(), grpc::StatusCode::NOT_FOUND);

  const std::string text = Scrape();
  EXPECT_EQ(SeriesValue(text, R"(fuserank_requests_total{code="OK",rpc="SetHotRows"})"), 1);
  EXPECT_EQ(SeriesValue(text, R"(fuserank_requests_total{code="NOT_FOUND",rpc="SetHotRows"})"), 3);
  EXPECT_EQ(
      SeriesValue(text, R"(fuserank_requests_total{code="INVALID_ARGUMENT",rpc="SetHotRows"})"), 3);
  EXPECT_EQ(SeriesValue(text, R"(fuserank_requests_total{code="NOT_FOUND",rpc="GetHotRows"})"), 2);
  EXPECT_EQ(SeriesValue(text, "fuserank_hot_rows_version"), 1);
  EXPECT_EQ(SeriesValue(text, R"(fuserank_hot_rows{table="item_0"})"), 5);
}

TEST_F(HotRowsE2eTest, TheModelFieldPicksTheModel) {
  Start("static");
  const AdminReply set = admin_->Set({{"item_0", {1, 2}}}, "second");
  ASSERT_TRUE(set.status.ok()) << set.status.error_message();
  EXPECT_EQ(set.response.version(), 1u);
  EXPECT_EQ(Current().version(), 0u) << "the default model is another";
  const AdminReply get = admin_->Get({}, "second");
  ASSERT_TRUE(get.status.ok()) << get.status.error_message();
  ASSERT_EQ(get.response.tables_size(), 2);
  EXPECT_EQ(FindTable(get.response, "item_0")->hot_rows(), 2u);
  EXPECT_EQ(admin_->Get({}, "hot").response.tables_size(), 4);
  // Both models have an item_0: the series sums them (SPEC section 4 has no model label).
  EXPECT_TRUE(admin_->Set({{"item_0", {5, 6, 7}}}).status.ok());
  const std::string text = Scrape();
  EXPECT_EQ(SeriesValue(text, R"(fuserank_hot_rows{table="item_0"})"), 5);
  EXPECT_EQ(SeriesValue(text, "fuserank_hot_rows_version"), 2);
}

// The engine knows the model by its spec's name ('second'); the caller addressed 'ctr'.
TEST_F(HotRowsE2eTest, RefusalsNameTheModelByItsServedName) {
  Start("frequency", "ctr");
  const std::string unknown = "model 'ctr': no table 'nope'; its tables: user_0, item_0";
  const AdminReply set = admin_->Set({{"nope", {1}}}, "ctr");
  EXPECT_EQ(set.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(set.status.error_message(), unknown);
  const AdminReply get = admin_->Get({"nope"}, "ctr");
  EXPECT_EQ(get.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(get.status.error_message(), unknown);
  const AdminReply rebuild = admin_->Rebuild({"nope"}, "ctr");
  EXPECT_EQ(rebuild.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(rebuild.status.error_message(), unknown);
  const AdminReply twice = admin_->Set({{"item_0", {1}}, {"item_0", {2}}}, "ctr");
  EXPECT_EQ(twice.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(twice.status.error_message(), HasSubstr("model 'ctr': table 'item_0'"));
  const AdminReply by_spec_name = admin_->Get({}, "second");
  EXPECT_EQ(by_spec_name.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(by_spec_name.status.error_message(), HasSubstr("loaded models: hot, ctr"));
  EXPECT_TRUE(admin_->Set({{"item_0", {1}}}, "ctr").status.ok());
}

TEST_F(HotRowsE2eTest, HitsAreCountedInGetHotRowsAndOnMetrics) {
  Start("static");
  ASSERT_TRUE(admin_->Set({{"item_0", {0, 1, 2, 3}}}).status.ok());
  SendTraffic(20, 7);
  const v1::HotRowsStatus status = Current();
  const v1::TableHotRowsStatus* item = FindTable(status, "item_0");
  ASSERT_NE(item, nullptr);
  // 640 item_0 lookups, nine in ten among rows 0..3: all of those hit.
  EXPECT_EQ(item->hits() + item->misses(), 640u);
  EXPECT_GT(item->hits(), 500u) << "hits stay 0 until the backend reads the hot set";
  const v1::TableHotRowsStatus* user = FindTable(status, "user_0");
  EXPECT_EQ(user->hits(), 0u) << "no hot rows: every lookup misses";
  EXPECT_EQ(user->misses(), 20u);

  const std::string text = Scrape();
  EXPECT_EQ(SeriesValue(text, testing::CacheLookups("item_0", "hit")), item->hits());
  EXPECT_EQ(SeriesValue(text, testing::CacheLookups("item_0", "miss")), item->misses());
  EXPECT_EQ(SeriesValue(text, testing::CacheLookups("user_0", "miss")), 20);
  EXPECT_EQ(SeriesValue(text, R"(fuserank_hot_rows{table="item_0"})"), 4);
}

TEST_F(HotRowsE2eTest, RebuildInstallsTheRowsTheTrafficReads) {
  Start("frequency");
  SendTraffic(100, 11);
  const AdminReply rebuilt = admin_->Rebuild({"item_0"});
  ASSERT_TRUE(rebuilt.status.ok()) << rebuilt.status.error_message();
  EXPECT_EQ(rebuilt.response.version(), 1u);
  ASSERT_EQ(rebuilt.response.tables_size(), 1);
  EXPECT_GE(rebuilt.response.tables(0).hot_rows(), 4u);
  EXPECT_LE(rebuilt.response.tables(0).hot_rows(), static_cast<uint32_t>(kCapacity));

  // The rebuilt set holds the hot rows: nearly every item_0 lookup hits now.
  const v1::TableHotRowsStatus before = *FindTable(Current(), "item_0");
  SendTraffic(20, 12);
  const v1::TableHotRowsStatus after = *FindTable(Current(), "item_0");
  const double hits = static_cast<double>(after.hits() - before.hits());
  const double lookups = hits + static_cast<double>(after.misses() - before.misses());
  ASSERT_EQ(lookups, 640);
  EXPECT_GE(hits / lookups, 0.85);

  const AdminReply all = admin_->Rebuild();
  ASSERT_TRUE(all.status.ok()) << all.status.error_message();
  EXPECT_EQ(all.response.version(), 2u) << "one swap for every table";
  EXPECT_EQ(all.response.tables_size(), 4);
  const AdminReply unknown = admin_->Rebuild({"item_0", "nope"});
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Current().version(), 2u);
}

TEST_F(HotRowsE2eTest, RebuildIsRefusedForTheStaticPolicy) {
  Start("static");
  ASSERT_TRUE(admin_->Set({{"item_0", {1, 2}}}).status.ok());
  const AdminReply reply = admin_->Rebuild();
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(reply.status.error_message(),
              AllOf(HasSubstr("cache.policy is static"), HasSubstr("SetHotRows")));
  // An unknown table is NOT_FOUND first, as under every policy (SPEC section 3).
  const AdminReply unknown = admin_->Rebuild({"item_0", "nope"});
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown.status.error_message(), HasSubstr("nope"));
  const v1::HotRowsStatus now = Current();
  EXPECT_EQ(now.version(), 1u);
  EXPECT_EQ(FindTable(now, "item_0")->hot_rows(), 2u);
}

TEST_F(HotRowsE2eTest, HotSetsSurviveAReload) {
  Start("static");
  ASSERT_TRUE(admin_->Set({{"item_0", {1, 2, 3}}, {"user_1", {4}}}).status.ok());
  SendTraffic(5, 3);
  const v1::TableHotRowsStatus before = *FindTable(Current(), "item_0");
  const grpc::Status reloaded = admin_->Reload("", hot_path_);
  ASSERT_TRUE(reloaded.ok()) << reloaded.error_message();
  const v1::HotRowsStatus after = Current();
  EXPECT_EQ(after.version(), 2u) << "the carried sets are one more swap";
  EXPECT_EQ(FindTable(after, "item_0")->hot_rows(), 3u);
  EXPECT_EQ(FindTable(after, "user_1")->hot_rows(), 1u);
  EXPECT_EQ(FindTable(after, "item_0")->hits(), before.hits()) << "counts since start";
  EXPECT_EQ(FindTable(after, "item_0")->misses(), before.misses());
  const std::string text = Scrape();
  EXPECT_EQ(SeriesValue(text, R"(fuserank_requests_total{code="OK",rpc="ReloadModel"})"), 1);
  EXPECT_EQ(SeriesValue(text, "fuserank_hot_rows_version"), 2);
}

}  // namespace
}  // namespace fuserank
