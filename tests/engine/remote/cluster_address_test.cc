// ParseAddress: a cluster node's "host:port" as remote.seed_nodes writes it ([IPv6] in
// brackets, as the listen addresses) and as MOVED replies give it (IPv6 bare).
#include <string>

#include "engine/remote/cluster_state.h"
#include "gtest/gtest.h"

namespace fuserank::remote {
namespace {

TEST(ClusterAddressTest, ReadsHostsAndPortsHiredisCanDial) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(ParseAddress("redis-0.redis:6379", &host, &port));
  EXPECT_EQ(host, "redis-0.redis");
  EXPECT_EQ(port, 6379);
  ASSERT_TRUE(ParseAddress("[::1]:7000", &host, &port));  // a seed node: brackets dropped
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 7000);
  ASSERT_TRUE(ParseAddress("fe80::1:7001", &host, &port));  // a MOVED reply's bare IPv6
  EXPECT_EQ(host, "fe80::1");
  EXPECT_EQ(port, 7001);
}

TEST(ClusterAddressTest, RefusesAddressesWithoutHostOrPort) {
  std::string host;
  int port = 0;
  for (const char* bad : {"redis", ":6379", "[]:6379", "redis:0", "redis:65536", "redis:6x"}) {
    EXPECT_FALSE(ParseAddress(bad, &host, &port)) << bad;
  }
}

}  // namespace
}  // namespace fuserank::remote
