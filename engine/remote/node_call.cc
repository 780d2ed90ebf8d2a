#include "engine/remote/node_call.h"

#include <poll.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fuserank::remote {
namespace {

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};

}  // namespace

absl::StatusOr<ReplyPtr> CallNode(const std::string& host, int port, const char* command,
                                  std::chrono::steady_clock::time_point deadline,
                                  const RespLimits& limits) {
  using Clock = std::chrono::steady_clock;
  std::unique_ptr<redisContext, ContextFree> c(redisConnectNonBlock(host.c_str(), port));
  if (c == nullptr) return absl::ResourceExhaustedError("out of memory for a connection");
  if (c->err != 0) return absl::UnavailableError(c->errstr);
  if (redisAppendCommand(c.get(), command) != REDIS_OK) return absl::InternalError(c->errstr);
  bool written = false;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(written ? "no complete reply in time"
                                                 : "could not connect and send in time");
    }
    pollfd p{c->fd, static_cast<short>(POLLIN | (written ? 0 : POLLOUT)), 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return absl::UnavailableError(std::strerror(errno));
    if (ready <= 0) continue;
    if (!written && (p.revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      int done = 0;
      if (redisBufferWrite(c.get(), &done) != REDIS_OK) return absl::UnavailableError(c->errstr);
      written = done != 0;
    }
    if ((p.revents & (POLLIN | POLLERR | POLLHUP)) == 0) continue;
    if (redisBufferRead(c.get()) != REDIS_OK) return absl::UnavailableError(c->errstr);
    redisReply* reply = nullptr;
    std::string why;
    switch (NextReply(c.get(), limits, &reply, &why)) {
      case NextState::kReply:
        return ReplyPtr(reply);
      case NextState::kMore:
        break;
      case NextState::kRefused:
        return absl::DataLossError(absl::StrCat("reply refused: ", why));
      case NextState::kBroken:
        return absl::UnavailableError(why);
    }
  }
}

}  // namespace fuserank::remote
