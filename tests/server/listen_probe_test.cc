// ListenAddressInUse: a port another socket listens on is in use, on any of the forms of
// server.listen; port 0, a free port and what only gRPC can judge are not; a wildcard is
// free while gRPC's dual-stack or IPv4 socket could bind.
#include "server/listen_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

// A TCP socket of `family` bound to its loopback address on a free port (or on `port`;
// with `any`, to the IPv6 wildcard, v6 only); `listening`: listen() on it too. port() is 0
// when it could not be bound.
class Socket {
 public:
  Socket(int family, bool listening, int port = 0, bool any = false) {
    fd_ = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (fd_ >= 0 && family == AF_INET6)
      setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    sockaddr_storage storage{};
    socklen_t size = 0;
    if (family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
      v4->sin_family = AF_INET;
      v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      v4->sin_port = htons(static_cast<uint16_t>(port));
      size = sizeof(*v4);
    } else {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
      v6->sin6_family = AF_INET6;
      v6->sin6_addr = any ? in6addr_any : in6addr_loopback;
      v6->sin6_port = htons(static_cast<uint16_t>(port));
      size = sizeof(*v6);
    }
    auto* address = reinterpret_cast<sockaddr*>(&storage);
    if (fd_ < 0 || bind(fd_, address, size) != 0 || (listening && listen(fd_, 4) != 0) ||
        getsockname(fd_, address, &size) != 0) {
      return;
    }
    port_ = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&storage)->sin_port
                                    : reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port);
  }
  ~Socket() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(ListenProbeTest, APortAnotherSocketListensOnIsInUse) {
  Socket held(AF_INET, true);
  ASSERT_NE(held.port(), 0);
  EXPECT_TRUE(ListenAddressInUse(absl::StrCat("127.0.0.1:", held.port())));
  EXPECT_TRUE(ListenAddressInUse(absl::StrCat("0.0.0.0:", held.port())));  // the wildcard too
  held.Close();
  EXPECT_FALSE(ListenAddressInUse(absl::StrCat("127.0.0.1:", held.port())));
}

TEST(ListenProbeTest, AnIpv6PortInUseIsFoundInBrackets) {
  Socket held(AF_INET6, true);
  if (held.port() == 0) {
    // No IPv6 loopback here: the probe must not call it in use either.
    EXPECT_FALSE(ListenAddressInUse("[::1]:8700"));
    return;
  }
  EXPECT_TRUE(ListenAddressInUse(absl::StrCat("[::1]:", held.port())));
}

TEST(ListenProbeTest, PortZeroAndWhatOnlyGrpcCanJudgeAreNotInUse) {
  Socket held(AF_INET, true);
  ASSERT_NE(held.port(), 0);
  EXPECT_FALSE(ListenAddressInUse("127.0.0.1:0"));
  // Not an address of this host (TEST-NET-1), not host:port at all.
  EXPECT_FALSE(ListenAddressInUse(absl::StrCat("192.0.2.1:", held.port())));
  EXPECT_FALSE(ListenAddressInUse("nonsense"));
}

TEST(ListenProbeTest, ABoundSocketThatDoesNotListenStillHoldsThePort) {
  Socket bound(AF_INET, false);
  ASSERT_NE(bound.port(), 0);
  EXPECT_TRUE(ListenAddressInUse(absl::StrCat("127.0.0.1:", bound.port())));
}

// A wildcard listens as gRPC does: a dual-stack [::] socket, else 0.0.0.0. So an IPv6
// socket on the port (here [::1], or a v6-only [::]) leaves "[::]:P" and "0.0.0.0:P" free:
// gRPC would serve IPv4 there.
TEST(ListenProbeTest, AWildcardIsFreeWhileIPv4CanStillBind) {
  Socket held(AF_INET6, true);
  if (held.port() == 0) {
    EXPECT_FALSE(ListenAddressInUse("[::]:8700"));  // no IPv6 here: nothing to hold
    return;
  }
  EXPECT_FALSE(ListenAddressInUse(absl::StrCat("[::]:", held.port())));
  EXPECT_FALSE(ListenAddressInUse(absl::StrCat("0.0.0.0:", held.port())));
  EXPECT_TRUE(ListenAddressInUse(absl::StrCat("[::1]:", held.port())));
  // Both families held: in use.
  Socket v4(AF_INET, true);
  ASSERT_NE(v4.port(), 0);
  Socket v6_only(AF_INET6, true, v4.port(), /*any=*/true);
  if (v6_only.port() == 0) return;  // another socket holds the IPv6 side of that port
  EXPECT_TRUE(ListenAddressInUse(absl::StrCat("[::]:", v4.port())));
  EXPECT_TRUE(ListenAddressInUse(absl::StrCat("0.0.0.0:", v4.port())));
  v4.Close();
  EXPECT_FALSE(ListenAddressInUse(absl::StrCat("[::]:", v6_only.port())));
}

}  // namespace
}  // namespace fuserank::server
