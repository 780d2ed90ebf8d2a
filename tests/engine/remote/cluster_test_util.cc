#include "tests/engine/remote/cluster_test_util.h"

#include <string_view>
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

::testing::AssertionResult WriteTableRows(const engine::EmbeddingTable& table,
                                          const std::function<std::string(int64_t)>& key,
                                          const std::vector<std::string>& seeds) {
  std::vector<std::string> keys;  // the commands point into these
  for (int64_t row = 0; row < table.rows; ++row) keys.push_back(key(row));
  std::vector<remote::Command> commands;
  for (int64_t row = 0; row < table.rows; ++row) {
    commands.push_back(
        {keys[row],
         std::string_view(reinterpret_cast<const char*>(table.data + row * table.row_bytes),
                          table.row_bytes),
         true});
  }
  return SetAllThroughNewClient(seeds, commands, std::chrono::seconds(10));
}

engine::Batch WithRowsAsKeys(const engine::Batch& local,
                             std::shared_ptr<const engine::Model> remote) {
  engine::Batch batch = local;
  batch.model = std::move(remote);
  batch.user.keys.assign(batch.user.rows.begin(), batch.user.rows.end());
  batch.item.keys.assign(batch.item.rows.begin(), batch.item.rows.end());
  return batch;
}

}  // namespace fuserank::testing
