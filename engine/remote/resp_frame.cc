#include "engine/remote/resp_frame.h"

// hiredis 0.14's sds.h declares its C functions without C linkage, and hiredis.h includes
// it: first here, inside extern "C".
extern "C" {
#include <hiredis/sds.h>
}
#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "absl/strings/str_cat.h"

namespace fuserank::remote {
namespace {

// hiredis nests arrays at most 7 deep (its read-task stack).
constexpr int kMaxNesting = 7;

enum class LineState { kLine, kIncomplete, kTooLong };

// The line that starts at buffer[pos], without its CRLF; *next is where the line after
// it starts.
LineState ReadLine(std::string_view buffer, size_t pos, size_t max_line, std::string_view* line,
                   size_t* next) {
  const size_t window = std::min(buffer.size(), pos + max_line + 2);
  const size_t crlf = buffer.substr(0, window).find("\r\n", pos);
  if (crlf == std::string_view::npos) {
    return window == pos + max_line + 2 ? LineState::kTooLong : LineState::kIncomplete;
  }
  *line = buffer.substr(pos, crlf - pos);
  *next = crlf + 2;
  return LineState::kLine;
}

// An integer as Redis writes one (and hiredis accepts): "0", or an optional '-' and digits
// with no leading zero, within a long long.
bool ParseLength(std::string_view digits, long long* n) {
  const std::string_view magnitude = digits.starts_with('-') ? digits.substr(1) : digits;
  if (magnitude.empty() || (magnitude[0] == '0' && digits.size() != 1)) return false;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *n);
  return ec == std::errc() && end == digits.data() + digits.size();
}

FrameScan Refused(std::string why) { return {FrameState::kRefused, 0, std::move(why)}; }

}  // namespace

FrameScan ScanReply(std::string_view buffer, const RespLimits& limits) {
  const int max_depth = std::min(limits.max_depth, kMaxNesting);
  std::array<long long, kMaxNesting> remaining{};  // elements left in each open array
  int depth = 0;
  size_t elements = 0;
  size_t pos = 0;
  for (;;) {
    std::string_view line;
    size_t next = 0;
    switch (ReadLine(buffer, pos, limits.max_line, &line, &next)) {
      case LineState::kIncomplete:
        return {};
      case LineState::kTooLong:
        return Refused(absl::StrCat("a reply line longer than ", limits.max_line, " bytes"));
      case LineState::kLine:
        break;
    }
    if (line.empty()) return Refused("an empty reply line");
    long long n = 0;
    switch (line[0]) {
      case '+':
      case '-':
        pos = next;
        break;
      case ':':
        if (!ParseLength(line.substr(1), &n)) return Refused("a malformed integer");
        pos = next;
        break;
      case '$':
        if (!ParseLength(line.substr(1), &n) || n < -1) return Refused("a malformed bulk length");
        if (n == -1) {
          pos = next;
          break;
        }
        if (static_cast<unsigned long long>(n) > limits.max_bulk) {
          return Refused(absl::StrCat("a bulk string of ", n, " bytes (at most ", limits.max_bulk,
                                      " expected)"));
        }
        if (buffer.size() < next + n + 2) return {};
        if (buffer.substr(next + n, 2) != "\r\n") return Refused("a bulk string without its CRLF");
        pos = next + n + 2;
        break;
      case '*':
        if (!ParseLength(line.substr(1), &n) || n < -1) return Refused("a malformed array length");
        pos = next;
        if (n <= 0) break;  // nil or empty
        if (static_cast<unsigned long long>(n) > limits.max_elements) {
          return Refused(absl::StrCat("an array of ", n, " elements (at most ", limits.max_elements,
                                      " expected)"));
        }
        elements += n;
        if (elements > limits.max_total_elements) {
          return Refused(
              absl::StrCat("more than ", limits.max_total_elements, " array elements in a reply"));
        }
        if (depth == max_depth) {
          return Refused(absl::StrCat("arrays nested deeper than ", max_depth));
        }
        remaining[depth++] = n;
        continue;
      default:
        return Refused(
            absl::StrCat("an unknown reply type (byte ", static_cast<int>(line[0]), ")"));
    }
    // An element ended: it may end the arrays around it too.
    while (depth > 0 && --remaining[depth - 1] == 0) --depth;
    if (depth == 0) return {FrameState::kComplete, pos, {}};
  }
}

NextState NextReply(redisContext* context, const RespLimits& limits, redisReply** reply,
                    std::string* why) {
  *reply = nullptr;
  const redisReader& reader = *context->reader;
  const std::string_view buffered(reader.buf + reader.pos, reader.len - reader.pos);
  FrameScan scan = ScanReply(buffered, limits);
  if (scan.state == FrameState::kIncomplete) return NextState::kMore;
  if (scan.state == FrameState::kRefused) {
    *why = std::move(scan.why);
    return NextState::kRefused;
  }
  void* raw = nullptr;
  if (redisGetReplyFromReader(context, &raw) != REDIS_OK || raw == nullptr) {
    *why = context->errstr;
    return NextState::kBroken;
  }
  *reply = static_cast<redisReply*>(raw);
  return NextState::kReply;
}

bool SkipBulk(redisContext* context, const RespLimits& limits, size_t wanted, size_t* announced) {
  redisReader& reader = *context->reader;
  const std::string_view buffered(reader.buf + reader.pos, reader.len - reader.pos);
  std::string_view line;
  size_t next = 0;
  long long n = 0;
  if (buffered.empty() || buffered[0] != '$' ||
      ReadLine(buffered, 0, limits.max_line, &line, &next) != LineState::kLine ||
      !ParseLength(line.substr(1), &n) || n < 0 || static_cast<unsigned long long>(n) == wanted ||
      static_cast<unsigned long long>(n) > limits.max_bulk) {
    return false;
  }
  *announced = static_cast<size_t>(n);
  reader.pos += next;
  return true;
}

NextState DropBulk(redisContext* context, size_t* left) {
  redisReader& reader = *context->reader;
  const size_t count = std::min(*left, reader.len - reader.pos);
  // The CRLF: the bytes dropped while 2 and then 1 are left.
  for (size_t i = *left > 2 ? *left - 2 : 0; i < count; ++i) {
    if (reader.buf[reader.pos + i] != (*left - i == 2 ? '\r' : '\n')) return NextState::kRefused;
  }
  reader.pos += count;
  *left -= count;
  // What hiredis does once it has consumed 1 KiB: the dropped bytes leave the buffer.
  if (reader.pos >= 1024 || reader.pos == reader.len) {
    sdsrange(reader.buf, static_cast<int>(reader.pos), -1);
    reader.pos = 0;
    reader.len = sdslen(reader.buf);
  }
  return *left == 0 ? NextState::kReply : NextState::kMore;
}

}  // namespace fuserank::remote
