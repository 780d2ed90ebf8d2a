#include "tests/engine/remote/cluster_test_util.h"

#include <utility>

namespace fuserank::testing {

void StartThreeMasters(std::unique_ptr<RedisCluster>* cluster) {
  if (!RedisCluster::Available()) GTEST_SKIP() << RedisCluster::kMissingMessage;
  absl::StatusOr<std::unique_ptr<RedisCluster>> started = RedisCluster::Start(3);
  ASSERT_TRUE(started.ok()) << started.status();
  *cluster = std::move(*started);
}

::testing::AssertionResult SetAll(remote::ClusterClient& client,
                                  const std::vector<remote::Command>& commands,
                                  std::chrono::seconds timeout) {
  std::vector<remote::Reply> replies;
  client.Run(commands, std::chrono::steady_clock::now() + timeout, &replies);
  for (size_t i = 0; i < commands.size(); ++i) {
    if (replies[i].state != remote::Reply::State::kValue) {
      return ::testing::AssertionFailure() << "SET " << commands[i].key << " was not stored";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SetAllThroughNewClient(const std::vector<std::string>& seeds,
                                                  const std::vector<remote::Command>& commands,
                                                  std::chrono::seconds timeout) {
  remote::ClusterOptions options;
  options.seeds = seeds;
  std::unique_ptr<remote::ClusterClient> client;
  const absl::Status status = remote::ClusterClient::Create(options, &client);
  if (!status.ok()) return ::testing::AssertionFailure() << "connecting: " << status;
  return SetAll(*client, commands, timeout);
}

}  // namespace fuserank::testing
