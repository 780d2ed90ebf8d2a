#include "server/listen_probe.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/statusor.h"
#include "server/config_validation.h"

namespace fuserank::server {
namespace {

// 0: bound (the address is free); else the errno of socket() or bind().
int TryBind(const addrinfo& info) {
  const int fd = ::socket(info.ai_family, info.ai_socktype | SOCK_CLOEXEC, info.ai_protocol);
  if (fd < 0) return errno;
  // As gRPC binds: a port whose last connections linger in TIME_WAIT is free to it.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int error = ::bind(fd, info.ai_addr, info.ai_addrlen) == 0 ? 0 : errno;
  ::close(fd);
  return error;
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
  // gRPC listens when any resolved address binds: in use only when none does.
  bool in_use = false;
  bool bound = false;
  for (const addrinfo* info = found; info != nullptr && !bound; info = info->ai_next) {
    const int error = TryBind(*info);
    bound = error == 0;
    in_use = in_use || error == EADDRINUSE;
  }
  ::freeaddrinfo(found);
  return in_use && !bound;
}

}  // namespace fuserank::server
