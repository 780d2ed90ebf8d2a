// RemoteTier::Stage against scripted nodes (tests/engine/remote/fake_node_util.h): a node
// slower than the batch's requests can wait is left at the batch's deadline, not at
// remote.fetch_deadline_ms; a node that answers every key with a value of the wrong length
// fails those keys as value_size. No redis needed.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote_stage.h"
#include "engine/remote_tier.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/remote/cluster_test_util.h"
#include "tests/engine/remote/fake_node_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using Clock = std::chrono::steady_clock;
using fuserank::testing::FakeNode;

constexpr int kRemoteTable = 2;  // item_1 of SmallSpec(1, 2, ...)

class RemoteTierHostileNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fuserank::testing::TestModel model =
        fuserank::testing::MakeRandomModel(fuserank::testing::SmallSpec(1, 2, 100, 8), 3);
    absl::StatusOr<std::shared_ptr<const Model>> local = fuserank::testing::BuildTestModel(model);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = *local;
    absl::StatusOr<std::shared_ptr<const Model>> remote =
        fuserank::testing::BuildTestModel(fuserank::testing::WithRedisTable(model, kRemoteTable));
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
  }

  // A node that owns every slot and answers GETs with `answer`.
  static FakeNode::Answer Owns(const std::atomic<int>* port, std::function<bool(int fd)> answer) {
    return [port, answer](int fd, const std::vector<std::string>& command) {
      if (!command.empty() && command[0] == "CLUSTER") {
        return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("127.0.0.1", port->load()));
      }
      return answer(fd);
    };
  }

  std::unique_ptr<RemoteTier> MakeTier(const FakeNode& node, int fetch_deadline_ms) {
    RemoteTierOptions options;
    options.seed_nodes = {node.address()};
    options.fetch_deadline_ms = fetch_deadline_ms;
    std::unique_ptr<RemoteTier> tier;
    EXPECT_TRUE(RemoteTier::Create(remote_, options, &tier).ok());
    return tier;
  }

  Batch MakeBatch() {
    std::mt19937_64 rng(5);
    test::RequestShape shape;
    shape.candidates = 6;
    shape.max_bag = 2;
    shape.out_of_range = false;
    const Batch local = test::MakeBatch(local_, {test::RandomRequest(local_->spec(), shape, rng)});
    return fuserank::testing::WithRowsAsKeys(local, remote_);
  }

  uint64_t Errors(const RemoteTier& tier, int kind) {
    return tier.counters(kRemoteTable).errors[kind].load();
  }

  std::shared_ptr<const Model> local_;
  std::shared_ptr<const Model> remote_;
};

TEST_F(RemoteTierHostileNodeTest, ASlowNodeIsLeftAtTheBatchsDeadline) {
  std::atomic<int> port{0};
  std::atomic<bool> waited{false};
  FakeNode node(Owns(&port, [&waited](int fd) {
    // 1 s before the first answer: within remote.fetch_deadline_ms (10 s), past the batch's
    // deadline.
    if (!waited.exchange(true)) std::this_thread::sleep_for(std::chrono::seconds(1));
    return FakeNode::SendAll(fd, "$-1\r\n");
  }));
  port = node.port();
  std::unique_ptr<RemoteTier> tier = MakeTier(node, 10000);
  Batch batch = MakeBatch();
  batch.deadline = Clock::now() + std::chrono::milliseconds(200);
  RemoteStage stage;
  std::vector<absl::Status> request_errors;
  tier->Stage(batch, nullptr, 0, &stage, &request_errors);
  // Had the fetch waited its 10 s, the node's answers (absent) would have come.
  EXPECT_GT(Errors(*tier, static_cast<int>(remote::ErrorKind::kTimeout)), 0u);
  ASSERT_EQ(request_errors.size(), 1u);
  EXPECT_EQ(request_errors[0].code(), absl::StatusCode::kUnavailable) << request_errors[0];
}

TEST_F(RemoteTierHostileNodeTest, ValuesOfTheWrongLengthAreValueSizeErrors) {
  std::atomic<int> port{0};
  const std::string value(64 << 10, 'x');  // a row is 8 x 4 bytes
  FakeNode node(Owns(&port, [&value](int fd) {
    return FakeNode::SendAll(fd, absl::StrCat("$", value.size(), "\r\n", value, "\r\n"));
  }));
  port = node.port();
  std::unique_ptr<RemoteTier> tier = MakeTier(node, 10000);
  const Batch batch = MakeBatch();
  RemoteStage stage;
  std::vector<absl::Status> request_errors;
  tier->Stage(batch, nullptr, 0, &stage, &request_errors);
  EXPECT_GT(Errors(*tier, 0), 0u);  // kind 0: value_size
  for (int kind = 1; kind < kRemoteErrorKinds; ++kind) EXPECT_EQ(Errors(*tier, kind), 0u) << kind;
  ASSERT_EQ(request_errors.size(), 1u);
  EXPECT_EQ(request_errors[0].code(), absl::StatusCode::kUnavailable) << request_errors[0];
}

}  // namespace
}  // namespace fuserank::engine
