#include "tests/e2e/remote_table_util.h"

#include <chrono>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model.h"
#include "engine/remote/cluster_client.h"

namespace fuserank::testing {

::testing::AssertionResult WriteTableToCluster(const std::string& spec_path, int table_index,
                                               const std::vector<std::string>& seeds) {
  absl::StatusOr<std::shared_ptr<const engine::Model>> model = engine::Model::Load(spec_path);
  if (!model.ok()) return ::testing::AssertionFailure() << model.status();
  const engine::EmbeddingTable& table = (*model)->tables()[table_index];
  std::vector<std::string> keys;  // the commands point into these
  for (int64_t row = 0; row < table.rows; ++row) {
    keys.push_back(absl::StrCat("fuserank:", table.name, ":", row));
  }
  std::vector<remote::Command> commands;
  for (int64_t row = 0; row < table.rows; ++row) {
    commands.push_back(
        {keys[row],
         std::string_view(reinterpret_cast<const char*>(table.data) + row * table.row_bytes,
                          table.row_bytes),
         true});
  }
  remote::ClusterOptions options;
  options.seeds = seeds;
  std::unique_ptr<remote::ClusterClient> client;
  const absl::Status created = remote::ClusterClient::Create(options, &client);
  if (!created.ok()) return ::testing::AssertionFailure() << created;
  std::vector<remote::Reply> replies;
  client->Run(commands, std::chrono::steady_clock::now() + std::chrono::seconds(20), &replies);
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].state != remote::Reply::State::kValue) {
      return ::testing::AssertionFailure() << commands[i].key << " was not stored";
    }
  }
  if (replies.size() != commands.size()) {
    return ::testing::AssertionFailure() << replies.size() << " replies to " << commands.size();
  }
  return ::testing::AssertionSuccess();
}

absl::StatusOr<std::string> WriteWithRedisTable(TestModel model, int table,
                                                const std::string& dir) {
  return WriteTestModel(WithRedisTable(std::move(model), table), dir);
}

v1::RankRequest RandomSmallSpecRequest(std::mt19937_64& rng, int64_t rows, int candidates) {
  v1::RankRequest request;
  v1::Feature* user = request.add_user_features();
  user->set_name("user_0");
  user->add_ids(static_cast<int64_t>(rng() % rows));
  request.add_user_dense(0.25f);
  request.add_user_dense(-0.5f);
  for (int c = 0; c < candidates; ++c) {
    v1::Candidate* candidate = request.add_candidates();
    candidate->set_item_id(c);
    for (const char* table : {"item_0", "item_1"}) {
      v1::Feature* feature = candidate->add_features();
      feature->set_name(table);
      for (uint64_t k = 0; k <= rng() % 2; ++k) {
        feature->add_ids(static_cast<int64_t>(rng() % rows));
      }
    }
    for (float d : {0.5f, -1.0f, 2.0f}) candidate->add_dense(d);
  }
  return request;
}

}  // namespace fuserank::testing
