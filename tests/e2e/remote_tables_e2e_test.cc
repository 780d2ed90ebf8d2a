// storage: redis tables through the real server on 127.0.0.1 against real Redis Cluster
// processes: a model whose item table is in the cluster answers every Rank request bit for
// bit as the same model served from its weights file; the tier series show on /metrics;
// under load, a killed master costs only the requests that needed it (UNAVAILABLE naming
// the table with on_remote_error: fail), never the server, and service recovers when the
// master returns or its replica is promoted; a slot migrated under load is followed
// (MOVED / ASK) without a failed request; a cluster unreachable at start stops the server
// (fail) or is served as zeros (zero).
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/model.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote/key_slot.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/hot_rows_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/rank_load_util.h"
#include "tests/e2e/remote_table_util.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using testing::RedisCluster;
using Clock = std::chrono::steady_clock;

constexpr int64_t kRows = 300;
constexpr int kRemote = 2;  // item_1 of SmallSpec(1, 2, ...)
// How long a test waits for what should take a moment (service back after a failure,
// traffic through a migration step): generous, as CI runs these under TSan on 2 cores.
constexpr auto kPatience = std::chrono::seconds(60);
// OK replies in a row, across the load threads, taken as service back.
constexpr int kStreak = 40;

v1::RankRequest RandomRequest(std::mt19937_64& rng, int candidates = 24) {
  return testing::RandomSmallSpecRequest(rng, kRows, candidates);
}

class RemoteTablesE2eTest : public ::testing::Test {
 protected:
  void StartCluster(int replicas) {
    absl::StatusOr<std::unique_ptr<RedisCluster>> cluster = RedisCluster::Start(3, replicas);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
  }

  void SetUp() override {
    if (!RedisCluster::Available()) GTEST_SKIP() << RedisCluster::kMissingMessage;
    dir_ = testing::TempDir("remote_tables_e2e");
    engine::ModelSpec spec = testing::SmallSpec(1, 2, kRows, 8);
    spec.name = "remote";
    spec.embedding_dtype = engine::DType::kF16;
    model_ = testing::MakeRandomModel(spec, 41);
    absl::StatusOr<std::string> local = testing::WriteTestModel(model_, dir_ + "/local");
    ASSERT_TRUE(local.ok()) << local.status();
    local_path_ = *local;
    absl::StatusOr<std::string> remote_path =
        testing::WriteWithRedisTable(model_, kRemote, dir_ + "/remote");
    ASSERT_TRUE(remote_path.ok()) << remote_path.status();
    remote_path_ = *remote_path;
  }

  void TearDown() override {
    for (auto& server : servers_) server->Shutdown();
  }

  // Writes item_1's rows from the local weights file to the cluster.
  void LoadTable() {
    ASSERT_TRUE(testing::WriteTableToCluster(local_path_, kRemote, cluster_->seeds()));
  }

  absl::StatusOr<std::unique_ptr<server::Server>> StartServer(const std::string& path,
                                                              const std::string& remote_yaml) {
    const std::string yaml = absl::StrCat(R"(
server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0", metrics_listen: "127.0.0.1:0", shutdown_grace_seconds: 2}
engine: {device: cpu, streams: 2, max_batch_wait_us: 200}
model: {path: ")",
                                          path, R"(", watch_interval_seconds: 0}
)",
                                          remote_yaml);
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "remote_tables_e2e.yaml");
    if (!config.ok()) return config.status();
    return server::Server::Start(*config);
  }

  // The seeds as a YAML list.
  std::string Seeds() const {
    return absl::StrCat("[\"", absl::StrJoin(cluster_->seeds(), "\", \""), "\"]");
  }

  v1::Ranker::Stub* Stub(const server::Server& server) {
    stubs_.push_back(v1::Ranker::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server.port()), grpc::InsecureChannelCredentials())));
    return stubs_.back().get();
  }

  server::Server* Keep(std::unique_ptr<server::Server> server) {
    servers_.push_back(std::move(server));
    return servers_.back().get();
  }

  // Polls `done()` until it is true (then true) or kPatience has passed (then false),
  // rather than sleeping a fixed time: a loaded machine (4 load threads on 2 cores, under
  // TSan) takes longer.
  static bool WaitFor(const std::function<bool()>& done) {
    const auto deadline = Clock::now() + kPatience;
    while (!done()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }
  // Waits until `load` has had `n` more OK replies than now.
  static bool WaitForMoreOks(const testing::RankLoad& load, int n) {
    const int from = load.ok.load();
    return WaitFor([&] { return load.ok.load() >= from + n; });
  }

  std::unique_ptr<RedisCluster> cluster_;
  std::string dir_;
  testing::TestModel model_;
  std::string local_path_;
  std::string remote_path_;
  std::vector<std::unique_ptr<server::Server>> servers_;
  std::vector<std::unique_ptr<v1::Ranker::Stub>> stubs_;
};

TEST_F(RemoteTablesE2eTest, EveryScoreIsTheLocalTablesBitForBitAndTheTiersAreExported) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(0));
  ASSERT_NO_FATAL_FAILURE(LoadTable());
  auto local = StartServer(local_path_, "");
  ASSERT_TRUE(local.ok()) << local.status();
  auto remote = StartServer(
      remote_path_, absl::StrCat("remote: {seed_nodes: ", Seeds(), ", fetch_deadline_ms: 2000}"));
  ASSERT_TRUE(remote.ok()) << remote.status();
  server::Server* remote_server = Keep(std::move(*remote));
  v1::Ranker::Stub* local_stub = Stub(*Keep(std::move(*local)));
  v1::Ranker::Stub* remote_stub = Stub(*remote_server);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 40; ++i) {
    const v1::RankRequest request = RandomRequest(rng);
    const testing::Reply want = testing::Rank(local_stub, request);
    const testing::Reply got = testing::Rank(remote_stub, request);
    ASSERT_TRUE(want.status.ok()) << want.status.error_message();
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    ASSERT_EQ(got.response.items_size(), want.response.items_size());
    for (int k = 0; k < want.response.items_size(); ++k) {
      EXPECT_EQ(got.response.items(k).index(), want.response.items(k).index()) << i << " " << k;
      EXPECT_EQ(got.response.items(k).score(), want.response.items(k).score()) << i << " " << k;
    }
  }
  absl::StatusOr<std::string> text = testing::HttpGet(remote_server->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_GT(testing::SeriesValue(
                *text, R"(fuserank_embedding_tier_lookups_total{table="item_1",tier="remote"})"),
            0);
  EXPECT_GT(testing::SeriesValue(
                *text, R"(fuserank_embedding_tier_lookups_total{table="item_1",tier="near"})"),
            0);
  EXPECT_GT(testing::SeriesValue(*text, "fuserank_remote_fetches_total"), 0);
  EXPECT_GT(testing::SeriesValue(*text, "fuserank_remote_fetch_duration_seconds_count"), 0);
}

// The warm-up's synthetic ids (which the cluster does not hold) are not traffic: before the
// first request every tier and error series of the table is there at 0, and no fetch is
// counted (the warm-up counted 500-odd `absent` lookups and two fetches).
TEST_F(RemoteTablesE2eTest, TheWarmUpIsNotCountedAndEverySeriesIsThereFromTheStart) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(0));
  ASSERT_NO_FATAL_FAILURE(LoadTable());
  auto remote = StartServer(
      remote_path_, absl::StrCat("remote: {seed_nodes: ", Seeds(), ", fetch_deadline_ms: 2000}"));
  ASSERT_TRUE(remote.ok()) << remote.status();
  server::Server* server = Keep(std::move(*remote));
  absl::StatusOr<std::string> text = testing::HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  const auto tier = [](const std::string& name) {
    return absl::StrCat(R"(fuserank_embedding_tier_lookups_total{table="item_1",tier=")", name,
                        "\"}");
  };
  for (const char* name : {"hot", "near", "remote", "absent"}) {
    EXPECT_EQ(testing::SeriesValue(*text, tier(name)), 0) << name;
  }
  for (const char* kind :
       {"timeout", "connection", "redirect", "cluster_down", "server", "value_size"}) {
    EXPECT_EQ(testing::SeriesValue(*text, absl::StrCat(R"(fuserank_remote_errors_total{kind=")",
                                                       kind, R"(",table="item_1"})")),
              0)
        << kind;
  }
  EXPECT_EQ(testing::SeriesValue(*text, "fuserank_remote_fetches_total"), 0);
  EXPECT_EQ(testing::SeriesValue(*text, "fuserank_remote_round_trips_total"), 0);
  EXPECT_EQ(testing::SeriesValue(*text, "fuserank_remote_fetch_duration_seconds_count"), 0);

  std::mt19937_64 rng(9);
  const testing::Reply reply = testing::Rank(Stub(*server), RandomRequest(rng));
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  text = testing::HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_GT(testing::SeriesValue(*text, tier("remote")) + testing::SeriesValue(*text, tier("near")),
            0);
  EXPECT_EQ(testing::SeriesValue(*text, tier("absent")), 0);  // every id is in the cluster
  EXPECT_LE(testing::SeriesValue(*text, "fuserank_remote_fetches_total"), 1);
}

TEST_F(RemoteTablesE2eTest, AKilledMasterFailsOnlyTheRequestsThatNeededItAndServiceReturns) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(0));
  ASSERT_NO_FATAL_FAILURE(LoadTable());
  auto remote =
      StartServer(remote_path_, absl::StrCat("remote: {seed_nodes: ", Seeds(),
                                             ", near_cache_rows: 0, fetch_deadline_ms: 2000}"));
  ASSERT_TRUE(remote.ok()) << remote.status();
  v1::Ranker::Stub* stub = Stub(*Keep(std::move(*remote)));
  testing::RankLoad load(stub, kRows, "'item_1'");
  ASSERT_TRUE(WaitFor([&] { return load.streak.load() >= kStreak; }))
      << "no " << kStreak << " OK replies in a row before the kill: " << load.ok.load() << " OK, "
      << load.unavailable.load() << " UNAVAILABLE, " << load.other.load() << " other";
  const int victim = cluster_->MasterOfSlot(remote::KeySlot("fuserank:item_1:0"));
  ASSERT_TRUE(cluster_->Kill(victim).ok());
  // Requests that need the dead master fail (it owns a third of the slots: most requests).
  EXPECT_TRUE(WaitFor([&] { return load.unavailable.load() > 0; }))
      << "no request failed while a master was down";
  ASSERT_TRUE(cluster_->Restart(victim).ok());
  ASSERT_TRUE(cluster_->WaitHealthy().ok());
  // Back: the returned master (empty, no persistence here) answers; its keys read absent.
  ASSERT_TRUE(WaitFor([&] { return load.streak.load() >= kStreak; }))
      << "service did not come back: no " << kStreak << " OK replies in a row within "
      << kPatience.count() << " s of the master's return";
  // And stays back: more replies, none of them failed.
  const int unavailable_before = load.unavailable.load();
  EXPECT_TRUE(WaitForMoreOks(load, 100));
  load.Stop();
  EXPECT_EQ(load.unnamed.load(), 0);
  EXPECT_EQ(load.other.load(), 0);
  EXPECT_EQ(load.unavailable.load(), unavailable_before);
}

TEST_F(RemoteTablesE2eTest, APromotedReplicaServesTheSameScores) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(1));
  ASSERT_NO_FATAL_FAILURE(LoadTable());
  ASSERT_TRUE(cluster_->WaitReplicated().ok());  // the replica holds every row
  auto local = StartServer(local_path_, "");
  ASSERT_TRUE(local.ok()) << local.status();
  auto remote =
      StartServer(remote_path_, absl::StrCat("remote: {seed_nodes: ", Seeds(),
                                             ", near_cache_rows: 0, fetch_deadline_ms: 2000}"));
  ASSERT_TRUE(remote.ok()) << remote.status();
  v1::Ranker::Stub* local_stub = Stub(*Keep(std::move(*local)));
  v1::Ranker::Stub* remote_stub = Stub(*Keep(std::move(*remote)));
  const int victim = cluster_->MasterOfSlot(remote::KeySlot("fuserank:item_1:0"));
  ASSERT_TRUE(cluster_->Kill(victim).ok());
  // The replica takes over after cluster-node-timeout (2 s); the map follows.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  auto promoted = [&] {
    const int owner = cluster_->MasterOfSlot(remote::KeySlot("fuserank:item_1:0"));
    return owner >= 0 && owner != victim;
  };
  while (Clock::now() < deadline && !promoted()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(promoted())
      << "victim " << victim << ", owner now "
      << cluster_->MasterOfSlot(remote::KeySlot("fuserank:item_1:0")) << "\n"
      << cluster_->Cli((victim + 1) % cluster_->size(), "cluster nodes").value_or("");
  ASSERT_TRUE(cluster_->WaitHealthy().ok());
  // Until the map has followed (it refreshes every second): some calls in a row answered.
  std::mt19937_64 rng(9);
  int in_a_row = 0;
  testing::Reply last;
  ASSERT_TRUE(WaitFor([&] {
    last = testing::Rank(remote_stub, RandomRequest(rng));
    in_a_row = last.status.ok() ? in_a_row + 1 : 0;
    return in_a_row >= 10;
  })) << "no 10 answers in a row after the promotion; the last: "
      << last.status.error_message();
  for (int i = 0; i < 10; ++i) {
    const v1::RankRequest request = RandomRequest(rng);
    const testing::Reply want = testing::Rank(local_stub, request);
    const testing::Reply got = testing::Rank(remote_stub, request);
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    ASSERT_EQ(got.response.items_size(), want.response.items_size());
    for (int k = 0; k < want.response.items_size(); ++k) {
      EXPECT_EQ(got.response.items(k).score(), want.response.items(k).score()) << i << " " << k;
    }
  }
}

TEST_F(RemoteTablesE2eTest, ASlotMigratedUnderLoadIsFollowed) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(0));
  ASSERT_NO_FATAL_FAILURE(LoadTable());
  // A deadline no busy test machine misses: what is tested here is the redirects.
  auto remote =
      StartServer(remote_path_, absl::StrCat("remote: {seed_nodes: ", Seeds(),
                                             ", near_cache_rows: 0, fetch_deadline_ms: 2000}"));
  ASSERT_TRUE(remote.ok()) << remote.status();
  server::Server* server = Keep(std::move(*remote));
  v1::Ranker::Stub* stub = Stub(*server);
  testing::RankLoad load(stub, kRows, "'item_1'");
  ASSERT_TRUE(WaitForMoreOks(load, 20)) << "no traffic before the migration";
  const std::string key = "fuserank:item_1:5";
  const int slot = remote::KeySlot(key);
  const int source = cluster_->MasterOfSlot(slot);
  const int target = (source + 1) % 3;
  auto id = [&](int node) {
    absl::StatusOr<std::string> out = cluster_->Cli(node, "cluster myid");
    return out.ok() ? std::string(absl::StripAsciiWhitespace(*out)) : std::string();
  };
  const std::string source_id = id(source);
  const std::string target_id = id(target);
  ASSERT_TRUE(
      cluster_->Cli(target, absl::StrCat("cluster setslot ", slot, " importing ", source_id)).ok());
  ASSERT_TRUE(
      cluster_->Cli(source, absl::StrCat("cluster setslot ", slot, " migrating ", target_id)).ok());
  ASSERT_TRUE(WaitForMoreOks(load, 20));  // traffic meets ASK
  absl::StatusOr<std::string> keys =
      cluster_->Cli(source, absl::StrCat("cluster getkeysinslot ", slot, " 1000"));
  ASSERT_TRUE(keys.ok());
  for (absl::string_view k : absl::StrSplit(*keys, '\n', absl::SkipEmpty())) {
    ASSERT_TRUE(cluster_
                    ->Cli(source, absl::StrCat("migrate 127.0.0.1 ", cluster_->port(target), " ", k,
                                               " 0 5000"))
                    .ok());
  }
  ASSERT_TRUE(WaitForMoreOks(load, 20));
  // The order the cluster specification gives: the target, the source, then the rest.
  for (int node : {target, source, 3 - target - source}) {
    ASSERT_TRUE(
        cluster_->Cli(node, absl::StrCat("cluster setslot ", slot, " node ", target_id)).ok());
  }
  ASSERT_TRUE(WaitForMoreOks(load, 40));  // traffic meets MOVED
  load.Stop();
  EXPECT_GT(load.ok.load(), 0);
  EXPECT_EQ(load.other.load(), 0);
  absl::StatusOr<std::string> text = testing::HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  std::string errors;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::StartsWith(line, "fuserank_remote_errors_total"))
      absl::StrAppend(&errors, line, "\n");
  }
  EXPECT_EQ(load.unavailable.load(), 0) << errors;
}

TEST_F(RemoteTablesE2eTest, AnUnreachableClusterStopsTheStartOrIsServedAsZeros) {
  const std::string unreachable = R"(remote: {seed_nodes: ["127.0.0.1:1"], on_remote_error: )";
  auto refused = StartServer(remote_path_, unreachable + "fail}");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("remote.seed_nodes"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("127.0.0.1:1"), std::string::npos) << refused.status();
  auto zeros = StartServer(remote_path_, unreachable + "zero}");
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  v1::Ranker::Stub* stub = Stub(*Keep(std::move(*zeros)));
  std::mt19937_64 rng(3);
  const testing::Reply reply = testing::Rank(stub, RandomRequest(rng));
  EXPECT_TRUE(reply.status.ok()) << reply.status.error_message();
}

}  // namespace
}  // namespace fuserank
