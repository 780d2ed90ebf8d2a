#include "server/listen_probe.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/statusor.h"
#include "server/config_validation.h"

namespace fuserank::server {
namespace {

// 0: bound (the address is free); else the errno of socket() or bind(). `dual_stack`: an
// IPv6 socket that takes IPv4 too (IPV6_V6ONLY off), as gRPC's wildcard socket.
int TryBind(int family, const sockaddr* address, socklen_t size, bool dual_stack = false) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  // As gRPC binds: a port whose last connections linger in TIME_WAIT is free to it.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (dual_stack) {
    const int zero = 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  const int error = ::bind(fd, address, size) == 0 ? 0 : errno;
  ::close(fd);
  return error;
}

bool IsWildcard(const addrinfo& info) {
  if (info.ai_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(info.ai_addr)->sin_addr.s_addr == INADDR_ANY;
  }
  if (info.ai_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(info.ai_addr)->sin6_addr;
    return IN6_IS_ADDR_UNSPECIFIED(&a);
  }
  return false;
}

// A wildcard address ("[::]:P" or "0.0.0.0:P"), as gRPC 1.51 listens on one: a dual-stack
// [::] socket, else 0.0.0.0; in use when neither binds and the port is why.
bool WildcardInUse(int port) {
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_addr = in6addr_any;
  v6.sin6_port = htons(static_cast<uint16_t>(port));
  const int v6_error =
      TryBind(AF_INET6, reinterpret_cast<const sockaddr*>(&v6), sizeof(v6), /*dual_stack=*/true);
  if (v6_error == 0) return false;
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_addr.s_addr = htonl(INADDR_ANY);
  v4.sin_port = htons(static_cast<uint16_t>(port));
  const int v4_error = TryBind(AF_INET, reinterpret_cast<const sockaddr*>(&v4), sizeof(v4));
  if (v4_error == 0) return false;
  return v6_error == EADDRINUSE || v4_error == EADDRINUSE;
}

}  // namespace

bool ListenAddressInUse(const std::string& address) {
  const absl::StatusOr<HostPort> parsed = ParseHostPort(address);
  if (!parsed.ok() || parsed->port == 0) return false;
  std::string host = parsed->host;
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(parsed->port).c_str(), &hints, &found) != 0) {
    return false;
  }
  bool wildcard = false;
  for (const addrinfo* info = found; info != nullptr; info = info->ai_next) {
    wildcard = wildcard || IsWildcard(*info);
  }
  if (wildcard) {
    ::freeaddrinfo(found);
    return WildcardInUse(parsed->port);
  }
  // gRPC listens when any resolved address binds: in use only when none does.
  bool in_use = false;
  bool bound = false;
  for (const addrinfo* info = found; info != nullptr && !bound; info = info->ai_next) {
    const int error = TryBind(info->ai_family, info->ai_addr, info->ai_addrlen);
    bound = error == 0;
    in_use = in_use || error == EADDRINUSE;
  }
  ::freeaddrinfo(found);
  return in_use && !bound;
}

}  // namespace fuserank::server
