// Bounds on what a Redis node may send before hiredis parses it. hiredis 0.14 buffers a
// bulk string of any announced length and allocates an array of any announced element
// count, so a broken or hostile node could make the client hold gigabytes. ScanReply walks
// one RESP2 reply in the bytes received so far and says whether it is complete, still
// arriving, or past the limits, without allocating; NextReply parses a reply from a
// connection only once it is complete and within them; SkipBulk and DropBulk let a bulk
// string of an unwanted length go by as it arrives, never buffered whole.
// Thread-compatible (pure functions, or one connection's reader).
#ifndef FUSERANK_ENGINE_REMOTE_RESP_FRAME_H_
#define FUSERANK_ENGINE_REMOTE_RESP_FRAME_H_

#include <cstddef>
#include <string>
#include <string_view>

struct redisContext;
struct redisReply;

namespace fuserank::remote {

struct RespLimits {
  size_t max_line = 4096;          // a status, error or integer line, a length header
  size_t max_bulk = 1 << 20;       // bytes of one bulk string
  size_t max_elements = 16;        // elements of one array
  size_t max_total_elements = 64;  // elements of all the reply's arrays together
  int max_depth = 2;               // arrays within arrays
};

enum class FrameState { kComplete, kIncomplete, kRefused };

struct FrameScan {
  FrameState state = FrameState::kIncomplete;
  size_t bytes = 0;  // kComplete: the reply's length
  std::string why;   // kRefused: which limit or rule, for an error message
};

// Scans the reply at the start of `buffer`.
FrameScan ScanReply(std::string_view buffer, const RespLimits& limits);

enum class NextState { kReply, kMore, kBroken, kRefused };

// The next complete reply buffered in `context` (read with redisBufferRead), into *reply
// (the caller frees it with freeReplyObject), or kMore when it has not all arrived.
// kRefused: the node sent something past `limits` (*why says what); the connection is then
// unusable. kBroken: hiredis failed (context->errstr).
NextState NextReply(redisContext* context, const RespLimits& limits, redisReply** reply,
                    std::string* why);

// When the next reply buffered in `context` is a bulk string whose header has arrived and
// announces a length other than `wanted` (at most limits.max_bulk: a longer one is left for
// NextReply to refuse), consumes that header and returns true with *announced; the caller
// then drops the string's announced + 2 bytes (payload and CRLF) with DropBulk. False, with
// nothing consumed, for anything else.
bool SkipBulk(redisContext* context, const RespLimits& limits, size_t wanted, size_t* announced);

// Drops up to *left buffered bytes of a bulk string SkipBulk let go by (its last two must
// be its CRLF) and lowers *left by as many. kReply: all dropped; kMore: *left still to
// come; kRefused: the string did not end with CRLF (the connection is unusable).
NextState DropBulk(redisContext* context, size_t* left);

}  // namespace fuserank::remote

#endif  // FUSERANK_ENGINE_REMOTE_RESP_FRAME_H_
