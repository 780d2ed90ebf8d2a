// ~ServedModel's order against a scripted Redis node (tests/engine/remote/fake_node_util.h):
// a periodic hot-row rebuild of a storage: redis table that is fetching from the cluster
// when its version is destroyed finishes on a live remote tier: the tier goes after the
// hot-row cache that stops the rebuild, not before.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "engine/hot_rows/hot_row_cache.h"
#include "engine/remote_tier.h"
#include "gtest/gtest.h"
#include "server/served_models.h"
#include "tests/engine/remote/fake_node_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using Clock = std::chrono::steady_clock;
using fuserank::testing::FakeNode;

constexpr int kRemoteTable = 2;  // item_1 of SmallSpec(1, 2, ...)

TEST(ServedModelTeardownTest, TheRemoteTierOutlivesAHotRowRebuildInProgress) {
  std::atomic<int> port{0};
  std::atomic<bool> fetching{false};
  std::atomic<int64_t> teardown_began{0};  // Clock ticks; 0: not yet
  std::atomic<int> refreshes_late{0};      // CLUSTER SLOTS 1 s or more into the teardown
  FakeNode* self = nullptr;
  FakeNode node([&](int fd, const std::vector<std::string>& command) {
    if (!command.empty() && command[0] == "CLUSTER") {
      const int64_t began = teardown_began.load();
      if (began != 0 && Clock::now().time_since_epoch().count() - began >=
                            std::chrono::nanoseconds(std::chrono::seconds(1)).count()) {
        ++refreshes_late;
      }
      return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("127.0.0.1", port.load()));
    }
    // The rebuild's GET: a slow node, 3 s (the tier's refresher asks for the map every
    // second meanwhile while the tier lives).
    fetching = true;
    for (int i = 0; i < 300 && !self->stopping(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return FakeNode::SendAll(fd, "$-1\r\n");
  });
  self = &node;
  port = node.port();

  const fuserank::testing::TestModel test_model = fuserank::testing::WithRedisTable(
      fuserank::testing::MakeRandomModel(fuserank::testing::SmallSpec(1, 2, 100, 8), 3),
      kRemoteTable);
  absl::StatusOr<std::shared_ptr<const engine::Model>> model =
      fuserank::testing::BuildTestModel(test_model);
  ASSERT_TRUE(model.ok()) << model.status();
  auto served = std::make_unique<ServedModel>();
  served->model = *model;
  engine::RemoteTierOptions remote;
  remote.seed_nodes = {node.address()};
  ASSERT_TRUE(engine::RemoteTier::Create(served->model, remote, &served->remote).ok());
  engine::HotRowCacheOptions cache;
  cache.capacity = 4;
  cache.frequency = true;
  cache.rebuild_interval = absl::Milliseconds(20);
  absl::StatusOr<std::unique_ptr<engine::HotRowCache>> hot_rows =
      engine::HotRowCache::Create("m", served->model, cache, nullptr);
  ASSERT_TRUE(hot_rows.ok()) << hot_rows.status();
  served->hot_rows = std::move(*hot_rows);
  served->hot_rows->manager()->SetRemoteRows(served->remote.get());
  const std::vector<int64_t> ids(8, 42);  // one id, sampled: the rebuild fetches it
  served->hot_rows->manager()->ObserveIds(kRemoteTable, ids);
  served->hot_rows->StartServing(nullptr);
  for (int i = 0; i < 500 && !fetching; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fetching) << "no rebuild fetched from the node";

  teardown_began = Clock::now().time_since_epoch().count();
  served.reset();  // waits for the rebuild's fetch (3 s), the tier still serving it
  EXPECT_GT(refreshes_late.load(), 0) << "the remote tier was destroyed before the rebuild ended";
}

}  // namespace
}  // namespace fuserank::server
