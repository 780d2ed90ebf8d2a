// What a Run() keeps of the values nodes send (tests/engine/remote/fake_node_util.h): a GET
// with Command::out takes exactly out.size() bytes there, and a value of another length is
// a kValueSize error whose bytes go by without being kept, the node's later replies served
// on the same connection; values kept in Reply::value hold no more capacity than they need
// and stay within the run's byte bound. No redis needed.
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/remote/cluster_client.h"
#include "gtest/gtest.h"
#include "tests/engine/remote/fake_node_util.h"

namespace fuserank::remote {
namespace {

using Clock = std::chrono::steady_clock;
using fuserank::testing::FakeNode;

constexpr size_t kRowBytes = 64;
constexpr size_t kSlackBytes = 64 << 10;  // as RemoteTier gives max_value_bytes

std::string Bulk(absl::string_view value) {
  return absl::StrCat("$", value.size(), "\r\n", value, "\r\n");
}

// A node that owns every slot and answers GET key with value(key).
FakeNode::Answer Serves(const std::atomic<int>* port, std::string (*value)(std::string_view)) {
  return [port, value](int fd, const std::vector<std::string>& command) {
    if (!command.empty() && command[0] == "CLUSTER") {
      return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("127.0.0.1", port->load()));
    }
    return FakeNode::SendAll(fd, Bulk(value(command.size() > 1 ? command[1] : "")));
  };
}

std::unique_ptr<ClusterClient> Connect(const FakeNode& node, const ClusterOptions& base = {}) {
  ClusterOptions options = base;
  options.seeds = {node.address()};
  options.connect_timeout = std::chrono::milliseconds(300);
  std::unique_ptr<ClusterClient> client;
  EXPECT_TRUE(ClusterClient::Create(options, &client).ok());
  return client;
}

// 64 KiB for keys that start with "big", else a row of kRowBytes of the key's first byte.
std::string BigOrRow(std::string_view key) {
  return key.starts_with("big") ? std::string(64 << 10, 'x') : std::string(kRowBytes, key[0]);
}

TEST(ClusterValueSizeTest, AValueOfAnotherLengthIsDroppedAndTheNextReplyServed) {
  std::atomic<int> port{0};
  FakeNode node(Serves(&port, BigOrRow));
  port = node.port();
  ClusterOptions options;
  options.max_value_bytes = kRowBytes + kSlackBytes;
  std::unique_ptr<ClusterClient> client = Connect(node, options);
  const std::vector<std::string> keys = {"big0", "a", "big1", "b"};
  std::vector<std::byte> rows(keys.size() * kRowBytes, std::byte{0});
  std::vector<Command> commands;
  for (size_t i = 0; i < keys.size(); ++i) {
    commands.push_back({keys[i], {}, false, {rows.data() + i * kRowBytes, kRowBytes}});
  }
  std::vector<Reply> replies;
  for (int run = 0; run < 2; ++run) {  // the connection kept idle after the first is sound
    const RunStats stats = client->Run(commands, Clock::now() + std::chrono::seconds(5), &replies);
    EXPECT_EQ(stats.errors[static_cast<int>(ErrorKind::kValueSize)], 2) << "run " << run;
    for (const size_t i : {0, 2}) {
      EXPECT_EQ(replies[i].state, Reply::State::kError) << keys[i];
      EXPECT_EQ(replies[i].error, ErrorKind::kValueSize) << ErrorKindName(replies[i].error);
      EXPECT_EQ(replies[i].announced_bytes, size_t{64} << 10);
    }
    for (const size_t i : {1, 3}) {
      ASSERT_EQ(replies[i].state, Reply::State::kValue) << ErrorKindName(replies[i].error);
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(rows.data() + i * kRowBytes), kRowBytes),
                std::string(kRowBytes, keys[i][0]));
      EXPECT_TRUE(replies[i].value.empty());  // the value went to `out` only
    }
  }
}

TEST(ClusterValueSizeTest, ANodeAnsweringEveryGetWithTooLongAValueLeavesNothingKept) {
  std::atomic<int> port{0};
  FakeNode node(Serves(&port, [](std::string_view) { return std::string(64 << 10, 'x'); }));
  port = node.port();
  ClusterOptions options;
  options.max_value_bytes = kRowBytes + kSlackBytes;
  std::unique_ptr<ClusterClient> client = Connect(node, options);
  constexpr int kKeys = 2000;  // 125 MiB of values, were they kept
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(absl::StrCat("fuserank:t:", i));
  std::vector<std::byte> rows(kKeys * kRowBytes);
  std::vector<Command> commands;
  for (int i = 0; i < kKeys; ++i) {
    commands.push_back({keys[i], {}, false, {rows.data() + i * kRowBytes, kRowBytes}});
  }
  std::vector<Reply> replies;
  const size_t before = mallinfo2().uordblks;
  const RunStats stats = client->Run(commands, Clock::now() + std::chrono::seconds(30), &replies);
  const size_t after = mallinfo2().uordblks;
  EXPECT_EQ(stats.errors[static_cast<int>(ErrorKind::kValueSize)], kKeys);
  size_t kept = 0;
  for (const Reply& reply : replies) kept += reply.value.capacity();
  EXPECT_LE(kept, kKeys * std::string().capacity());
  // The replies themselves and the connection's buffers, not the 125 MiB sent.
  EXPECT_LT(after, before + (size_t{16} << 20)) << "heap grew by " << (after - before) << " bytes";
}

TEST(ClusterValueSizeTest, AWrongLengthValueWithoutItsCrlfFailsItsPipeline) {
  std::atomic<int> port{0};
  FakeNode node([&port](int fd, const std::vector<std::string>& command) {
    if (!command.empty() && command[0] == "CLUSTER") {
      return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("127.0.0.1", port.load()));
    }
    return FakeNode::SendAll(fd, absl::StrCat("$100\r\n", std::string(100, 'v'), "XY"));
  });
  port = node.port();
  std::unique_ptr<ClusterClient> client = Connect(node);
  std::vector<std::byte> row(kRowBytes);
  const Command command{"k", {}, false, absl::MakeSpan(row)};
  std::vector<Reply> replies;
  client->Run({&command, 1}, Clock::now() + std::chrono::seconds(5), &replies);
  EXPECT_EQ(replies[0].error, ErrorKind::kServer) << ErrorKindName(replies[0].error);
}

TEST(ClusterValueSizeTest, KeptValuesHoldNoMoreThanTheyNeedAndStayWithinTheRunsBound) {
  std::atomic<int> port{0};
  FakeNode node(Serves(&port, BigOrRow));
  port = node.port();
  ClusterOptions options;
  options.max_run_value_bytes = 100 << 10;  // one 64 KiB value, not two
  std::unique_ptr<ClusterClient> client = Connect(node, options);
  std::vector<Reply> replies;
  const std::vector<Command> big = {{"big0"}, {"big1"}};
  const RunStats stats = client->Run(big, Clock::now() + std::chrono::seconds(5), &replies);
  EXPECT_EQ(stats.errors[static_cast<int>(ErrorKind::kServer)], 1);
  EXPECT_EQ(replies[0].value.size() + replies[1].value.size(), size_t{64} << 10);
  // The same replies reused for short values: the 64 KiB are given back.
  const std::vector<Command> small = {{"a"}, {"b"}};
  client->Run(small, Clock::now() + std::chrono::seconds(5), &replies);
  EXPECT_EQ(replies[0].value, std::string(kRowBytes, 'a'));
  EXPECT_EQ(replies[1].value, std::string(kRowBytes, 'b'));
  for (const Reply& reply : replies) EXPECT_LT(reply.value.capacity(), 2 * kRowBytes);
}

}  // namespace
}  // namespace fuserank::remote
