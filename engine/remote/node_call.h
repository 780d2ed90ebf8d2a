// One command to one node on a connection of its own, bounded in time and in what the node
// may send: the slot-map refresh's CLUSTER SLOTS. Connect, send and reply all count
// against one deadline (a node that drips its reply a byte at a time still ends there),
// and the reply is parsed only within RespLimits. Thread-safe (no shared state).
#ifndef FUSERANK_ENGINE_REMOTE_NODE_CALL_H_
#define FUSERANK_ENGINE_REMOTE_NODE_CALL_H_

#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/remote/resp_frame.h"

namespace fuserank::remote {

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;

// Sends `command` (no arguments to escape) to host:port and returns its reply.
// DEADLINE_EXCEEDED when no complete reply came by `deadline`, UNAVAILABLE when the
// connection failed, DATA_LOSS when the node sent more than `limits` allow.
absl::StatusOr<ReplyPtr> CallNode(const std::string& host, int port, const char* command,
                                  std::chrono::steady_clock::time_point deadline,
                                  const RespLimits& limits);

}  // namespace fuserank::remote

#endif  // FUSERANK_ENGINE_REMOTE_NODE_CALL_H_
