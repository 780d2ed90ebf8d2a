#include "engine/remote/cluster_client.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/remote/key_slot.h"
#include "gtest/gtest.h"
#include "tests/engine/remote/cluster_test_util.h"
#include "tests/testing/redis_cluster.h"

namespace fuserank::remote {
namespace {

using fuserank::testing::RedisCluster;
using Clock = std::chrono::steady_clock;

class ClusterClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fuserank::testing::StartThreeMasters(&cluster_);
    if (IsSkipped() || HasFatalFailure()) return;
    ClusterOptions options;
    options.seeds = {cluster_->seeds()[1]};
    ASSERT_TRUE(ClusterClient::Create(options, &client_).ok());
  }

  // Writes key<i> = value<i> for i < n through the client.
  void Write(int n) {
    std::vector<std::string> keys;
    std::vector<std::string> values;
    for (int i = 0; i < n; ++i) {
      keys.push_back(absl::StrCat("key", i));
      values.push_back(absl::StrCat("value", i));
    }
    std::vector<Command> commands;
    for (int i = 0; i < n; ++i) commands.push_back({keys[i], values[i], true});
    ASSERT_TRUE(fuserank::testing::SetAll(*client_, commands, std::chrono::seconds(5)));
  }

  RunStats Get(const std::vector<std::string>& keys, std::vector<Reply>* replies,
               std::chrono::milliseconds deadline = std::chrono::seconds(5)) {
    std::vector<Command> commands;
    for (const std::string& key : keys) commands.push_back({key, {}, false});
    return client_->Run(commands, Clock::now() + deadline, replies);
  }

  // Starts moving `slot` from node `source` to `target` as redis-cli --cluster reshard does,
  // and migrates `key` (its only key written) there: the slot is then migrating.
  void StartMigration(int slot, int source, int target, const std::string& key) {
    ASSERT_TRUE(
        cluster_->Cli(target, absl::StrCat("cluster setslot ", slot, " importing ", NodeId(source)))
            .ok());
    ASSERT_TRUE(
        cluster_->Cli(source, absl::StrCat("cluster setslot ", slot, " migrating ", NodeId(target)))
            .ok());
    ASSERT_TRUE(cluster_
                    ->Cli(source, absl::StrCat("migrate 127.0.0.1 ", cluster_->port(target), " ",
                                               key, " 0 5000"))
                    .ok());
  }

  std::string NodeId(int node) {
    absl::StatusOr<std::string> id = cluster_->Cli(node, "cluster myid");
    return id.ok() ? std::string(absl::StripAsciiWhitespace(*id)) : "";
  }

  std::unique_ptr<RedisCluster> cluster_;
  std::unique_ptr<ClusterClient> client_;
};

TEST_F(ClusterClientTest, KeySlotAgreesWithTheClustersOwn) {
  for (const std::string key : {"key0", "key17", "fuserank:item_id:123456789", "{tag}x", "a{}b"}) {
    absl::StatusOr<std::string> slot =
        cluster_->Cli(0, absl::StrCat("cluster keyslot '", key, "'"));
    ASSERT_TRUE(slot.ok()) << slot.status();
    int expected = -1;
    ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(*slot), &expected)) << *slot;
    EXPECT_EQ(KeySlot(key), expected) << key;
  }
}

TEST_F(ClusterClientTest, ReadsBackWhatItWroteWithOnePipelinePerNode) {
  Write(300);
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back(absl::StrCat("key", i));
  keys.push_back("never-written");
  std::vector<Reply> replies;
  const RunStats stats = Get(keys, &replies);
  EXPECT_EQ(stats.round_trips, 3);  // 300 keys spread over the 3 masters
  EXPECT_EQ(stats.moved, 0);
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(replies[i].state, Reply::State::kValue) << keys[i];
    EXPECT_EQ(replies[i].value, absl::StrCat("value", i));
  }
  EXPECT_EQ(replies[300].state, Reply::State::kAbsent);
}

TEST_F(ClusterClientTest, FollowsMovedAfterASlotMigrated) {
  Write(50);
  const int slot = KeySlot("key7");
  const int source = cluster_->MasterOfSlot(slot);
  ASSERT_GE(source, 0);
  const int target = (source + 1) % 3;
  ASSERT_NO_FATAL_FAILURE(StartMigration(slot, source, target, "key7"));
  for (int node = 0; node < 3; ++node) {
    ASSERT_TRUE(
        cluster_->Cli(node, absl::StrCat("cluster setslot ", slot, " node ", NodeId(target))).ok());
  }
  std::vector<Reply> replies;
  RunStats stats = Get({"key7"}, &replies);
  ASSERT_EQ(replies[0].state, Reply::State::kValue);
  EXPECT_EQ(replies[0].value, "value7");
  EXPECT_EQ(stats.moved, 1);
  stats = Get({"key7"}, &replies);  // the map learnt the slot's new owner
  EXPECT_EQ(stats.moved, 0);
  EXPECT_EQ(replies[0].value, "value7");
}

TEST_F(ClusterClientTest, FollowsAskWhileASlotIsMigrating) {
  Write(50);
  const int slot = KeySlot("key9");
  const int source = cluster_->MasterOfSlot(slot);
  ASSERT_GE(source, 0);
  const int target = (source + 2) % 3;
  ASSERT_NO_FATAL_FAILURE(StartMigration(slot, source, target, "key9"));
  std::vector<Reply> replies;
  const RunStats stats = Get({"key9"}, &replies);  // the source answers ASK: key9 moved on
  ASSERT_EQ(replies[0].state, Reply::State::kValue);
  EXPECT_EQ(replies[0].value, "value9");
  EXPECT_EQ(stats.ask, 1);
  EXPECT_EQ(stats.moved, 0);
}

TEST_F(ClusterClientTest, AKilledMasterFailsOnlyItsKeysAndRecoversWhenItReturns) {
  Write(100);
  std::vector<std::string> keys;
  for (int i = 0; i < 100; ++i) keys.push_back(absl::StrCat("key", i));
  const int victim = cluster_->MasterOfSlot(KeySlot("key0"));
  ASSERT_GE(victim, 0);
  ASSERT_TRUE(cluster_->Kill(victim).ok());
  std::vector<Reply> replies;
  RunStats stats = Get(keys, &replies);
  int failed = 0;
  for (int i = 0; i < 100; ++i) {
    const bool on_victim =
        cluster_->port(victim) == cluster_->port(cluster_->MasterOfSlot(KeySlot(keys[i])));
    if (on_victim) {
      ++failed;
      EXPECT_EQ(replies[i].state, Reply::State::kError) << keys[i];
      EXPECT_EQ(replies[i].error, ErrorKind::kConnection) << keys[i];
    } else {
      EXPECT_EQ(replies[i].state, Reply::State::kValue) << keys[i];
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_EQ(stats.errors[static_cast<int>(ErrorKind::kConnection)], failed);
  ASSERT_TRUE(cluster_->Restart(victim).ok());
  ASSERT_TRUE(cluster_->WaitHealthy().ok());
  // The restarted master holds no data (no persistence here): its keys are now absent, not
  // errors.
  stats = Get(keys, &replies);
  EXPECT_EQ(stats.errors[static_cast<int>(ErrorKind::kConnection)], 0);
  EXPECT_EQ(replies[0].state, Reply::State::kAbsent);
}

TEST_F(ClusterClientTest, APausedNodeCostsItsKeysTheDeadlineAndNoMore) {
  Write(60);
  std::vector<std::string> keys;
  for (int i = 0; i < 60; ++i) keys.push_back(absl::StrCat("key", i));
  const int paused = cluster_->MasterOfSlot(KeySlot("key1"));
  ASSERT_TRUE(cluster_->Pause(paused).ok());
  std::vector<Reply> replies;
  const RunStats stats = Get(keys, &replies, std::chrono::milliseconds(200));
  ASSERT_TRUE(cluster_->Resume(paused).ok());
  EXPECT_EQ(replies[1].state, Reply::State::kError);
  EXPECT_EQ(replies[1].error, ErrorKind::kTimeout);
  EXPECT_GT(stats.errors[static_cast<int>(ErrorKind::kTimeout)], 0);
  int served = 0;
  for (const Reply& reply : replies) served += reply.state == Reply::State::kValue ? 1 : 0;
  EXPECT_EQ(served + stats.errors[static_cast<int>(ErrorKind::kTimeout)], 60);
  EXPECT_GT(served, 0);
}

// Redis 7 announces a NULL endpoint then ("connect where you sent CLUSTER SLOTS").
TEST_F(ClusterClientTest, MapsAClusterThatAnnouncesUnknownEndpoints) {
  Write(30);
  for (int node = 0; node < 3; ++node) {
    ASSERT_TRUE(
        cluster_->Cli(node, "config set cluster-preferred-endpoint-type unknown-endpoint").ok());
  }
  ClusterOptions options;
  options.seeds = {cluster_->seeds()[2]};
  std::unique_ptr<ClusterClient> client;
  const absl::Status status = ClusterClient::Create(options, &client);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<Command> commands;
  std::vector<std::string> keys;
  for (int i = 0; i < 30; ++i) keys.push_back(absl::StrCat("key", i));
  for (const std::string& key : keys) commands.push_back({key, {}, false});
  std::vector<Reply> replies;
  const RunStats stats = client->Run(commands, Clock::now() + std::chrono::seconds(5), &replies);
  EXPECT_EQ(stats.moved, 0);  // the map was right: no key was redirected
  for (int i = 0; i < 30; ++i) EXPECT_EQ(replies[i].value, absl::StrCat("value", i)) << keys[i];
}

TEST(ClusterClientStartTest, AnUnreachableClusterIsAClearErrorAndEveryReadFails) {
  ClusterOptions options;
  options.seeds = {"127.0.0.1:1"};  // nothing listens on port 1
  options.connect_timeout = std::chrono::milliseconds(100);
  std::unique_ptr<ClusterClient> client;
  const absl::Status status = ClusterClient::Create(options, &client);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("127.0.0.1:1"), std::string::npos) << status;
  ASSERT_NE(client, nullptr);
  EXPECT_FALSE(client->has_map());
  std::vector<Command> commands = {{"a", {}, false}, {"b", {}, false}};
  std::vector<Reply> replies;
  const RunStats stats =
      client->Run(commands, Clock::now() + std::chrono::milliseconds(100), &replies);
  EXPECT_EQ(replies[0].error, ErrorKind::kClusterDown);
  EXPECT_EQ(stats.errors[static_cast<int>(ErrorKind::kClusterDown)], 2);
}

}  // namespace
}  // namespace fuserank::remote
