// storage: redis tables through the real server against real Redis Cluster processes,
// in front of the near cache: the Admin hot-row calls (Set, Get, clear) work for a redis
// table, its hot ids are then served from the hot tier (tier="hot", no remote lookups)
// bit for bit as the same table served from the weights file; and freshness under load:
// while clients rank continuously, every row rewritten in the cluster is served within
// remote.near_cache_ttl_ms plus one fetch of the write, and no request fails.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model.h"
#include "engine/remote/cluster_client.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/hot_rows_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/remote_table_util.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using testing::RedisCluster;
using Clock = std::chrono::steady_clock;

constexpr int64_t kRows = 200;
constexpr int kRemote = 2;  // item_1 of SmallSpec(1, 2, ...)
constexpr int kTtlMs = 300;
constexpr int kFetchDeadlineMs = 1000;

v1::RankRequest RandomRequest(std::mt19937_64& rng, int candidates = 16) {
  return testing::RandomSmallSpecRequest(rng, kRows, candidates);
}

// Whether `got` ranks exactly as `want` (indices and score bits).
bool SameRanking(const testing::Reply& want, const testing::Reply& got) {
  if (!want.status.ok() || !got.status.ok()) return false;
  if (want.response.items_size() != got.response.items_size()) return false;
  for (int k = 0; k < want.response.items_size(); ++k) {
    if (want.response.items(k).index() != got.response.items(k).index() ||
        want.response.items(k).score() != got.response.items(k).score()) {
      return false;
    }
  }
  return true;
}

class RemoteHotRowsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisCluster::Available()) GTEST_SKIP() << RedisCluster::kMissingMessage;
    absl::StatusOr<std::unique_ptr<RedisCluster>> cluster = RedisCluster::Start(3);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    dir_ = testing::TempDir("remote_hot_rows_e2e");
    engine::ModelSpec spec = testing::SmallSpec(1, 2, kRows, 8);
    spec.name = "remote";
    spec.embedding_dtype = engine::DType::kF16;
    testing::TestModel model = testing::MakeRandomModel(spec, 43);
    absl::StatusOr<std::string> a = testing::WriteTestModel(model, dir_ + "/a");
    ASSERT_TRUE(a.ok()) << a.status();
    local_a_ = *a;
    // The same model with other item_1 rows: what a rewrite of the cluster installs.
    testing::TestModel other = model;
    other.weights["embeddings.item_1.weight"] =
        testing::MakeRandomModel(spec, 44).weights["embeddings.item_1.weight"];
    absl::StatusOr<std::string> b = testing::WriteTestModel(other, dir_ + "/b");
    ASSERT_TRUE(b.ok()) << b.status();
    local_b_ = *b;
    absl::StatusOr<std::string> remote_path =
        testing::WriteWithRedisTable(model, kRemote, dir_ + "/remote");
    ASSERT_TRUE(remote_path.ok()) << remote_path.status();
    remote_path_ = *remote_path;
  }

  void TearDown() override {
    for (auto& server : servers_) server->Shutdown();
  }

  // Writes item_1's rows of the weights file at `path` to the cluster.
  void LoadTable(const std::string& path) {
    ASSERT_TRUE(testing::WriteTableToCluster(path, kRemote, cluster_->seeds()));
  }

  server::Server* Start(const std::string& path, const std::string& extra_yaml) {
    const std::string yaml = absl::StrCat(R"(
server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0", metrics_listen: "127.0.0.1:0", shutdown_grace_seconds: 2}
engine: {device: cpu, streams: 2, max_batch_wait_us: 200}
model: {path: ")",
                                          path, R"(", watch_interval_seconds: 0}
)",
                                          extra_yaml);
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "remote_hot_rows_e2e.yaml");
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return nullptr;
    servers_.push_back(std::move(*server));
    return servers_.back().get();
  }

  std::string RemoteYaml(const std::string& more) const {
    return absl::StrCat("remote: {seed_nodes: [\"", absl::StrJoin(cluster_->seeds(), "\", \""),
                        "\"], fetch_deadline_ms: ", kFetchDeadlineMs, more, "}");
  }

  v1::Ranker::Stub* Stub(const server::Server& server) {
    stubs_.push_back(v1::Ranker::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server.port()), grpc::InsecureChannelCredentials())));
    return stubs_.back().get();
  }

  static double Tier(const server::Server& server, const std::string& tier) {
    absl::StatusOr<std::string> text = testing::HttpGet(server.metrics_port(), "/metrics");
    EXPECT_TRUE(text.ok()) << text.status();
    if (!text.ok()) return -1;
    const double value = testing::SeriesValue(
        *text, absl::StrCat(R"(fuserank_embedding_tier_lookups_total{table="item_1",tier=")", tier,
                            "\"}"));
    return value < 0 ? 0 : value;  // a series not yet exported: nothing counted
  }

  std::unique_ptr<RedisCluster> cluster_;
  std::string dir_;
  std::string local_a_;
  std::string local_b_;
  std::string remote_path_;
  std::vector<std::unique_ptr<server::Server>> servers_;
  std::vector<std::unique_ptr<v1::Ranker::Stub>> stubs_;
};

TEST_F(RemoteHotRowsE2eTest, AdminCallsWorkAndHotIdsAreServedFromTheHotTier) {
  LoadTable(local_a_);
  server::Server* local = Start(local_a_, "");
  server::Server* remote = Start(remote_path_, RemoteYaml(", near_cache_rows: 0"));
  ASSERT_NE(local, nullptr);
  ASSERT_NE(remote, nullptr);
  testing::HotRowsAdmin admin(remote->admin_port());
  std::vector<int64_t> all;
  for (int64_t id = 0; id < kRows; ++id) all.push_back(id);
  const testing::AdminReply set = admin.Set({{"item_1", all}});
  ASSERT_TRUE(set.status.ok()) << set.status.error_message();
  const v1::TableHotRowsStatus* table = testing::FindTable(set.response, "item_1");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->hot_rows(), static_cast<uint32_t>(kRows));

  const double remote_before = Tier(*remote, "remote");
  v1::Ranker::Stub* local_stub = Stub(*local);
  v1::Ranker::Stub* remote_stub = Stub(*remote);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 30; ++i) {
    const v1::RankRequest request = RandomRequest(rng);
    const testing::Reply want = testing::Rank(local_stub, request);
    const testing::Reply got = testing::Rank(remote_stub, request);
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    EXPECT_TRUE(SameRanking(want, got)) << "request " << i;
  }
  EXPECT_GT(Tier(*remote, "hot"), 0);
  EXPECT_EQ(Tier(*remote, "remote"), remote_before);  // every item_1 id was hot
  const testing::AdminReply got = admin.Get({"item_1"});
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  ASSERT_NE(testing::FindTable(got.response, "item_1"), nullptr);
  EXPECT_GT(testing::FindTable(got.response, "item_1")->hits(), 0u);

  // Cleared: the ids are fetched again.
  const testing::AdminReply cleared = admin.Set({{"item_1", {}}});
  ASSERT_TRUE(cleared.status.ok()) << cleared.status.error_message();
  ASSERT_NE(testing::FindTable(cleared.response, "item_1"), nullptr);
  EXPECT_EQ(testing::FindTable(cleared.response, "item_1")->hot_rows(), 0u);
  const v1::RankRequest request = RandomRequest(rng);
  EXPECT_TRUE(SameRanking(testing::Rank(local_stub, request), testing::Rank(remote_stub, request)));
  EXPECT_GT(Tier(*remote, "remote"), remote_before);

  // More ids than the capacity (the default 4096), one id repeated: INVALID_ARGUMENT, as
  // SPEC section 3 counts them, and the set stays as it was.
  const testing::AdminReply over = admin.Set({{"item_1", std::vector<int64_t>(4097, 1)}});
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(over.status.error_message(),
              ::testing::HasSubstr("4097 ids, more than the hot-set capacity 4096"));
  const testing::AdminReply after = admin.Get({"item_1"});
  ASSERT_NE(testing::FindTable(after.response, "item_1"), nullptr);
  EXPECT_EQ(testing::FindTable(after.response, "item_1")->hot_rows(), 0u);
}

TEST_F(RemoteHotRowsE2eTest, RewrittenRowsAreServedWithinTheTtlUnderLoadAndNoRequestFails) {
  LoadTable(local_a_);
  server::Server* a = Start(local_a_, "");
  server::Server* b = Start(local_b_, "");
  server::Server* remote =
      Start(remote_path_, RemoteYaml(absl::StrCat(", near_cache_ttl_ms: ", kTtlMs)));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(remote, nullptr);
  v1::Ranker::Stub* remote_stub = Stub(*remote);
  // Clients ranking continuously: every reply must be OK.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937_64 rng(200 + t);
      while (!stop.load()) {
        const testing::Reply reply = testing::Rank(remote_stub, RandomRequest(rng));
        (reply.status.ok() ? ok : failed)++;
      }
    });
  }
  v1::Ranker::Stub* a_stub = Stub(*a);
  v1::Ranker::Stub* b_stub = Stub(*b);
  std::mt19937_64 rng(5);
  // Rewrites the cluster's item_1 rows as those of `to`, then checks requests sent once
  // the TTL and one fetch have passed since the write returned: every one ranks as `to`.
  auto rewrite_and_check = [&](const std::string& to, v1::Ranker::Stub* reference,
                               const char* name) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * kTtlMs));  // rows cached
    LoadTable(to);
    std::this_thread::sleep_for(std::chrono::milliseconds(kTtlMs + kFetchDeadlineMs));
    for (int i = 0; i < 20; ++i) {
      const v1::RankRequest request = RandomRequest(rng);
      const testing::Reply got = testing::Rank(remote_stub, request);
      ASSERT_TRUE(got.status.ok()) << got.status.error_message();
      EXPECT_TRUE(SameRanking(testing::Rank(reference, request), got))
          << "request " << i << " after the rewrite to " << name;
    }
  };
  rewrite_and_check(local_b_, b_stub, "b");
  rewrite_and_check(local_a_, a_stub, "a");
  rewrite_and_check(local_b_, b_stub, "b");
  stop = true;
  for (std::thread& t : clients) t.join();
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(Tier(*remote, "near"), 0);  // the clients' rows were served near in between
}

}  // namespace
}  // namespace fuserank
