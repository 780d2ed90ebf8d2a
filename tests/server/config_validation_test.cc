// The address forms the config accepts (host:port, [v6]:port) and the literal loopback
// addresses that keep the admin port private.
#include "server/config_validation.h"

#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

TEST(HostPortTest, ParsesTheForms) {
  absl::StatusOr<HostPort> v4 = ParseHostPort("127.0.0.1:0");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 0);
  absl::StatusOr<HostPort> v6 = ParseHostPort("[::1]:8700");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "[::1]");
  EXPECT_EQ(v6->port, 8700);
  EXPECT_TRUE(ParseHostPort("localhost:65535").ok());
  EXPECT_TRUE(ParseHostPort("my-host.example.com:1").ok());
  EXPECT_FALSE(ParseHostPort("localhost:").ok());
  EXPECT_FALSE(ParseHostPort(":80").ok());
  EXPECT_FALSE(ParseHostPort("host:-1").ok());
  EXPECT_FALSE(ParseHostPort("host:+1").ok());
  EXPECT_FALSE(ParseHostPort("[::1:80").ok());
  EXPECT_FALSE(ParseHostPort("[zz]:80").ok());
  EXPECT_FALSE(ParseHostPort("a b:80").ok());
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.255.0.9"));
  EXPECT_TRUE(IsLoopbackHost("[::1]"));
  EXPECT_TRUE(IsLoopbackHost("[::ffff:127.0.0.1]"));
  // Only literal addresses: names resolve to whatever DNS or /etc/hosts says.
  EXPECT_FALSE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("127.attacker.example"));
  EXPECT_FALSE(IsLoopbackHost("127.0.0.1.example"));
  EXPECT_FALSE(IsLoopbackHost("[::ffff:10.0.0.1]"));
  EXPECT_FALSE(IsLoopbackHost("128.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
}

}  // namespace
}  // namespace fuserank::server
