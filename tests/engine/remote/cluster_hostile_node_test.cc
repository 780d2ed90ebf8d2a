// ClusterClient against nodes that misbehave (tests/engine/remote/fake_node_util.h): a
// reply dripped forever, announced sizes past any real reply, an empty slot map, a node
// that closes idle connections, Redis 7's short MOVED form, CLUSTER SLOTS endpoints that are
// NULL, empty or "?", a MOVED naming a slot not the key's, ranges that overlap. No redis
// needed.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote/key_slot.h"
#include "gtest/gtest.h"
#include "tests/engine/remote/fake_node_util.h"

namespace fuserank::remote {
namespace {

using Clock = std::chrono::steady_clock;
using fuserank::testing::FakeNode;

bool IsCommand(const std::vector<std::string>& command, std::string_view name) {
  return !command.empty() && command[0] == name;
}

// A node that owns every slot and answers GET with `value`.
FakeNode::Answer OwnsEverything(const std::atomic<int>* port, std::string value) {
  return [port, value](int fd, const std::vector<std::string>& command) {
    if (IsCommand(command, "CLUSTER"))
      return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("127.0.0.1", port->load()));
    return FakeNode::SendAll(fd, absl::StrCat("$", value.size(), "\r\n", value, "\r\n"));
  };
}

std::unique_ptr<ClusterClient> Connect(std::vector<std::string> seeds, absl::Status* status,
                                       size_t max_value_bytes = 1 << 20) {
  ClusterOptions options;
  options.seeds = std::move(seeds);
  options.connect_timeout = std::chrono::milliseconds(300);
  options.max_value_bytes = max_value_bytes;
  std::unique_ptr<ClusterClient> client;
  *status = ClusterClient::Create(options, &client);
  return client;
}

Reply GetOne(ClusterClient& client, std::string_view key) {
  std::vector<Reply> replies;
  const Command command{key, {}, false};
  client.Run({&command, 1}, Clock::now() + std::chrono::seconds(5), &replies);
  return replies[0];
}

TEST(ClusterHostileNodeTest, ASlotMapDrippedForeverEndsAtTheDeadline) {
  FakeNode node([&node](int fd, const std::vector<std::string>&) {
    const std::string reply = FakeNode::AllSlotsTo("127.0.0.1", 1) + std::string(1 << 20, ' ');
    for (const char byte : reply) {
      if (node.stopping() || !FakeNode::SendAll(fd, std::string_view(&byte, 1))) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  });
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({node.address()}, &status);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("no complete reply in time"), std::string::npos) << status;
  EXPECT_FALSE(client->has_map());
}

TEST(ClusterHostileNodeTest, AnArrayOfBillionsOfRangesIsRefusedWhenAnnounced) {
  FakeNode node([&node](int fd, const std::vector<std::string>&) {
    if (!FakeNode::SendAll(fd, "*2147483647\r\n")) return false;
    const std::string range = "*3\r\n:0\r\n:0\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n";
    while (!node.stopping() && FakeNode::SendAll(fd, range)) {
    }
    return false;
  });
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({node.address()}, &status);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("an array of 2147483647 elements"), std::string::npos) << status;
}

TEST(ClusterHostileNodeTest, AMapThatCoversNoSlotDoesNotReplaceOneThatDoes) {
  FakeNode empty(
      [](int fd, const std::vector<std::string>&) { return FakeNode::SendAll(fd, "*0\r\n"); });
  std::atomic<int> port{0};  // set once the node listens; read by its threads
  FakeNode full(OwnsEverything(&port, "row"));
  port = full.port();
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({empty.address(), full.address()}, &status);
  ASSERT_TRUE(status.ok()) << status;
  const Reply reply = GetOne(*client, "k");
  EXPECT_EQ(reply.state, Reply::State::kValue) << ErrorKindName(reply.error);
  EXPECT_EQ(reply.value, "row");

  std::unique_ptr<ClusterClient> alone = Connect({empty.address()}, &status);
  EXPECT_NE(status.message().find("its map covers no slot"), std::string::npos) << status;
}

TEST(ClusterHostileNodeTest, AValueLongerThanAnyRowFailsItsPipelineWhenAnnounced) {
  FakeNode node([&node](int fd, const std::vector<std::string>& command) {
    if (IsCommand(command, "CLUSTER")) {
      return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("127.0.0.1", node.port()));
    }
    if (!FakeNode::SendAll(fd, "$100000000000\r\n")) return false;
    const std::string chunk(1 << 16, 'v');
    while (!node.stopping() && FakeNode::SendAll(fd, chunk)) {
    }
    return false;
  });
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({node.address()}, &status, 4096);
  ASSERT_TRUE(status.ok()) << status;
  const Reply reply = GetOne(*client, "k");
  EXPECT_EQ(reply.state, Reply::State::kError);
  EXPECT_EQ(reply.error, ErrorKind::kServer) << ErrorKindName(reply.error);
}

TEST(ClusterHostileNodeTest, AnIdleConnectionTheNodeClosedIsNotReused) {
  std::atomic<int> port{0};  // set once the node listens; read by its threads
  FakeNode node([&port](int fd, const std::vector<std::string>& command) {
    if (IsCommand(command, "CLUSTER")) {
      return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("127.0.0.1", port.load()));
    }
    FakeNode::SendAll(fd, "$3\r\nrow\r\n");
    return false;  // as a node with `timeout` set closes an idle client
  });
  port = node.port();
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({node.address()}, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(GetOne(*client, "a").value, "row");
  for (int i = 0; i < 500 && node.closed() == 0; ++i) {  // wait for its close
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(node.closed(), 1);
  const Reply reply = GetOne(*client, "b");
  EXPECT_EQ(reply.state, Reply::State::kValue) << ErrorKindName(reply.error);
}

TEST(ClusterHostileNodeTest, AReplyNobodyAskedForIsNotTakenForTheNextBatch) {
  std::atomic<int> port{0};
  FakeNode node([&port](int fd, const std::vector<std::string>& command) {
    if (IsCommand(command, "CLUSTER")) {
      return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("127.0.0.1", port.load()));
    }
    return FakeNode::SendAll(fd, "$3\r\nrow\r\n$5\r\nstale\r\n");  // one reply too many
  });
  port = node.port();
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({node.address()}, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(GetOne(*client, "a").value, "row");
  EXPECT_EQ(GetOne(*client, "b").value, "row");  // not "stale", on a connection kept idle
}

TEST(ClusterHostileNodeTest, AMovedWithoutAHostMeansTheHostAsked) {
  FakeNode target([](int fd, const std::vector<std::string>&) {
    return FakeNode::SendAll(fd, "$5\r\nmoved\r\n");
  });
  const int target_port = target.port();
  std::atomic<int> port{0};  // set once the node listens; read by its threads
  FakeNode owner([&port, target_port](int fd, const std::vector<std::string>& command) {
    if (IsCommand(command, "CLUSTER")) {
      return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("127.0.0.1", port.load()));
    }
    return FakeNode::SendAll(fd, absl::StrCat("-MOVED 7 :", target_port, "\r\n"));
  });
  port = owner.port();
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({owner.address()}, &status);
  ASSERT_TRUE(status.ok()) << status;
  const Reply reply = GetOne(*client, "k");
  EXPECT_EQ(reply.state, Reply::State::kValue) << ErrorKindName(reply.error);
  EXPECT_EQ(reply.value, "moved");
}

TEST(ClusterHostileNodeTest, ANodeNamedByHostNameIsResolvedBeforeBatchesUseIt) {
  std::atomic<int> port{0};  // set once the node listens; read by its threads
  FakeNode node([&port](int fd, const std::vector<std::string>& command) {
    if (IsCommand(command, "CLUSTER")) {
      return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("localhost", port.load()));
    }
    return FakeNode::SendAll(fd, "$3\r\nrow\r\n");
  });
  port = node.port();
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({node.address()}, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(client->known_nodes(), 1);  // "localhost" (a seed is not a node until a map names it)
  // The node listens on 127.0.0.1 only: where localhost also resolves to ::1 first, the
  // failed connection moves the node on to its next address.
  Reply reply;
  for (int attempt = 0; attempt < 3 && reply.state != Reply::State::kValue; ++attempt) {
    reply = GetOne(*client, "k");
  }
  EXPECT_EQ(reply.state, Reply::State::kValue) << ErrorKindName(reply.error);
}

TEST(ClusterHostileNodeTest, ARefreshForgetsTheNodesItsMapNoLongerNames) {
  std::atomic<int> port{0};          // set once the node listens; read by its threads
  std::atomic<int> announced{7001};  // masters that come and go, as pods replaced on new addresses
  FakeNode node([&port, &announced](int fd, const std::vector<std::string>& command) {
    if (!IsCommand(command, "CLUSTER")) return FakeNode::SendAll(fd, "$3\r\nrow\r\n");
    const std::string range =
        absl::StrCat("*3\r\n:0\r\n:8191\r\n*2\r\n$9\r\n127.0.0.1\r\n:", announced.load(), "\r\n");
    const std::string mine =
        absl::StrCat("*3\r\n:8192\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:", port.load(), "\r\n");
    return FakeNode::SendAll(fd, absl::StrCat("*2\r\n", range, mine));
  });
  port = node.port();
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({node.address()}, &status);
  ASSERT_TRUE(status.ok()) << status;
  for (int round = 0; round < 50; ++round) {
    ++announced;
    ASSERT_TRUE(client->RefreshMap().ok());
    ASSERT_EQ(client->known_nodes(), 2) << "round " << round;
  }
}

// A key of a slot in [first, last].
std::string KeyIn(int first, int last) {
  for (int i = 0;; ++i) {
    std::string key = absl::StrCat("k", i);
    const int slot = KeySlot(key);
    if (slot >= first && slot <= last) return key;
  }
}

std::string Range(int first, int last, absl::string_view endpoint, int port) {
  return absl::StrCat("*3\r\n:", first, "\r\n:", last, "\r\n*2\r\n", endpoint, ":", port, "\r\n");
}

// https://redis.io/commands/cluster-slots/: a NULL endpoint (Redis 7's
// cluster-preferred-endpoint-type unknown-endpoint) and an empty one are the node asked,
// with the port given; "?" is a node not known, whose slots stay unmapped.
TEST(ClusterHostileNodeTest, SlotEndpointsNullAndEmptyAreTheNodeAskedAndAQuestionMarkIsNone) {
  FakeNode target([](int fd, const std::vector<std::string>&) {
    return FakeNode::SendAll(fd, "$6\r\ntarget\r\n");
  });
  const int target_port = target.port();
  std::atomic<int> port{0};
  FakeNode asked([&port, target_port](int fd, const std::vector<std::string>& command) {
    if (!IsCommand(command, "CLUSTER")) return FakeNode::SendAll(fd, "$5\r\nasked\r\n");
    return FakeNode::SendAll(fd, absl::StrCat("*3\r\n", Range(0, 8191, "$-1\r\n", target_port),
                                              Range(8192, 12287, "$0\r\n\r\n", target_port),
                                              Range(12288, 16383, "$1\r\n?\r\n", port.load())));
  });
  port = asked.port();
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({asked.address()}, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(GetOne(*client, KeyIn(0, 8191)).value, "target");
  EXPECT_EQ(GetOne(*client, KeyIn(8192, 12287)).value, "target");
  const Reply unknown = GetOne(*client, KeyIn(12288, 16383));
  EXPECT_EQ(unknown.state, Reply::State::kError);
  EXPECT_EQ(unknown.error, ErrorKind::kClusterDown) << ErrorKindName(unknown.error);
}

TEST(ClusterHostileNodeTest, AMovedNamingAnotherSlotMovesOnlyTheKeyNotThatSlot) {
  FakeNode other([](int fd, const std::vector<std::string>&) {
    return FakeNode::SendAll(fd, "$5\r\nother\r\n");
  });
  const int other_port = other.port();
  const std::string redirected = KeyIn(0, 16383);
  const int named_slot = (KeySlot(redirected) + 1) % 16384;
  std::atomic<int> port{0};
  std::atomic<int> maps{0};
  FakeNode owner([&](int fd, const std::vector<std::string>& command) {
    if (IsCommand(command, "CLUSTER")) {
      // The first map only: a refresh the MOVED asks for must not hide what it changed.
      if (maps++ > 0) return false;
      return FakeNode::SendAll(fd, FakeNode::AllSlotsTo("127.0.0.1", port.load()));
    }
    if (command.size() > 1 && command[1] == redirected) {
      return FakeNode::SendAll(
          fd, absl::StrCat("-MOVED ", named_slot, " 127.0.0.1:", other_port, "\r\n"));
    }
    return FakeNode::SendAll(fd, "$5\r\nowner\r\n");
  });
  port = owner.port();
  absl::Status status;
  std::unique_ptr<ClusterClient> client = Connect({owner.address()}, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(GetOne(*client, redirected).value, "other");  // followed, as Redis clients do
  // The slot the MOVED named still goes to its owner in the map.
  EXPECT_EQ(GetOne(*client, KeyIn(named_slot, named_slot)).value, "owner");
}

TEST(ClusterHostileNodeTest, AMapWhoseRangesOverlapIsRefusedAtOnce) {
  std::atomic<int> port{0};
  FakeNode overlapping([&port](int fd, const std::vector<std::string>& command) {
    if (!IsCommand(command, "CLUSTER")) return FakeNode::SendAll(fd, "$-1\r\n");
    // Every slot 64 times over (16,384 times cost 268M steps, were each range walked; a
    // reply that long takes a sanitized build past the refresh's 500 ms to parse).
    std::string reply = "*64\r\n";
    const std::string range = Range(0, 16383, "$9\r\n127.0.0.1\r\n", port.load());
    for (int i = 0; i < 64; ++i) reply += range;
    return FakeNode::SendAll(fd, reply);
  });
  port = overlapping.port();
  std::atomic<int> full_port{0};
  FakeNode full(OwnsEverything(&full_port, "row"));
  full_port = full.port();
  absl::Status status;
  std::unique_ptr<ClusterClient> alone = Connect({overlapping.address()}, &status);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("slot ranges overlap (slot 0 twice)"), std::string::npos)
      << status;
  EXPECT_FALSE(alone->has_map());
  std::unique_ptr<ClusterClient> client = Connect({overlapping.address(), full.address()}, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(GetOne(*client, "k").value, "row");
}

}  // namespace
}  // namespace fuserank::remote
