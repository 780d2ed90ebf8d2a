// ListenAddressInUse: a port another socket listens on is in use, on any of the forms of
// server.listen; port 0, a free port and what only gRPC can judge are not.
#include "server/listen_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

// A TCP socket of `family` bound to its loopback address on a free port; `listening`:
// listen() on it too.
class Socket {
 public:
  Socket(int family, bool listening) {
    fd_ = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage storage{};
    socklen_t size = 0;
    if (family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
      v4->sin_family = AF_INET;
      v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      size = sizeof(*v4);
    } else {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
      v6->sin6_family = AF_INET6;
      v6->sin6_addr = in6addr_loopback;
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

}  // namespace
}  // namespace fuserank::server
