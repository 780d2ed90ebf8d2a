// ParseAddress: a cluster node's "host:port" as remote.seed_nodes writes it ([IPv6] in
// brackets, as the listen addresses) and as MOVED replies give it (IPv6 bare); ParseRedirect:
// MOVED and ASK errors, Redis 7's short forms included.
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

TEST(ClusterAddressTest, ReadsRedirectsAsRedisWritesThem) {
  std::string host;
  int port = 0;
  int slot = 0;
  ASSERT_TRUE(ParseRedirect("MOVED 3999 10.0.0.2:6381", "10.0.0.1", &slot, &host, &port));
  EXPECT_EQ(slot, 3999);
  EXPECT_EQ(host, "10.0.0.2");
  EXPECT_EQ(port, 6381);
  // Redis 7's short form: the host of the node asked.
  ASSERT_TRUE(ParseRedirect("MOVED 7 :6380", "redis-1.redis", &slot, &host, &port));
  EXPECT_EQ(host, "redis-1.redis");
  EXPECT_EQ(port, 6380);
  // Bare IPv6, which also starts with ':' but is no short form.
  ASSERT_TRUE(ParseRedirect("ASK 12 ::1:6382", "10.0.0.1", &slot, &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 6382);
  ASSERT_TRUE(ParseRedirect("MOVED 12 ::ffff:10.0.0.5:6383", "10.0.0.1", &slot, &host, &port));
  EXPECT_EQ(host, "::ffff:10.0.0.5");
  EXPECT_EQ(port, 6383);
  ASSERT_TRUE(ParseRedirect("MOVED 12 ?:6384", "10.0.0.1", &slot, &host, &port));
  EXPECT_EQ(host, "?");  // an endpoint the node does not know
  for (const char* bad :
       {"MOVED", "MOVED 12", "MOVED 16384 h:1", "MOVED x h:1", "MOVED 1x h:1", "MOVED 12 h"}) {
    EXPECT_FALSE(ParseRedirect(bad, "10.0.0.1", &slot, &host, &port)) << bad;
  }
}

}  // namespace
}  // namespace fuserank::remote
