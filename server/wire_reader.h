// protobuf's wire format read exactly as protobuf 3.21's parser (ParseContext) reads it,
// for the in-place parsers (rank_request_view.cc): varints of at most 10 bytes, tags of at
// most 5, lengths protobuf takes and that fit in their message, strings checked for UTF-8,
// unknown fields skipped (groups to the recursion limit). A Reader is a cursor over one
// message's bytes, which it does not own; plain functions; thread-safe.
#ifndef FUSERANK_SERVER_WIRE_READER_H_
#define FUSERANK_SERVER_WIRE_READER_H_

#include <climits>
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace fuserank::server::wire {

// protobuf's recursion budget (CodedInputStream's default limit): the top level starts
// with it; each nested message and each group takes one, and none may take it below 0.
constexpr int kRecursionLimit = 100;
// protobuf refuses a length this close to INT_MAX (its parser's slop bytes).
constexpr uint32_t kMaxLength = INT_MAX - 16;

// The bytes of one message, read front to back as protobuf's ParseContext reads them.
struct Reader {
  const uint8_t* p;
  const uint8_t* end;

  bool done() const { return p == end; }

  // A varint of at most 10 bytes; bits past 64 are dropped, as protobuf does.
  bool Varint(uint64_t* value) {
    if (p != end && *p < 0x80) {
      *value = *p++;
      return true;
    }
    uint64_t result = 0;
    for (int i = 0; i < 10 && p != end; ++i) {
      const uint8_t byte = *p++;
      result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        *value = result;
        return true;
      }
    }
    return false;
  }

  // A tag: a varint of at most 5 bytes, bits past 32 dropped.
  bool Tag(uint32_t* tag) {
    if (p != end && *p < 0x80) {
      *tag = *p++;
      return true;
    }
    uint32_t result = 0;
    for (int i = 0; i < 5 && p != end; ++i) {
      const uint8_t byte = *p++;
      result |= static_cast<uint32_t>(byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        *tag = result;
        return true;
      }
    }
    return false;
  }

  // A length of at most 5 bytes that protobuf takes (below 2^31, the fifth byte < 8) and
  // that fits in what is left of this message.
  bool Length(uint32_t* length) {
    if (p != end && *p < 0x80) {
      *length = *p++;
      return *length <= static_cast<size_t>(end - p);
    }
    uint32_t result = 0;
    for (int i = 0;; ++i) {
      if (i == 5 || p == end) return false;
      const uint8_t byte = *p++;
      if (i == 4 && byte >= 8) return false;
      result |= static_cast<uint32_t>(byte & 0x7f) << (7 * i);
      if (byte < 0x80) break;
    }
    if (result > kMaxLength || result > static_cast<size_t>(end - p)) return false;
    *length = result;
    return true;
  }

  bool Skip(size_t n) {
    if (n > static_cast<size_t>(end - p)) return false;
    p += n;
    return true;
  }

  // The next `length` bytes as a message of their own (Length() checked they are here).
  Reader Sub(uint32_t length) {
    Reader sub{p, p + length};
    p += length;
    return sub;
  }
};

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF),
// which protobuf requires of every proto3 string.
bool IsUtf8(const uint8_t* p, const uint8_t* end);

// A length-delimited string that must be valid UTF-8 (protobuf's rule for proto3 strings).
bool String(Reader* in, absl::string_view* out);

// Skips an unknown field (or a known one of another wire type) whose tag was just read, as
// protobuf does. `depth`: the recursion budget left at the message that holds it.
bool SkipField(Reader* in, uint32_t tag, int depth);

// The varints in the bytes [p, end) of a packed field: each ends with a byte below 0x80.
int64_t CountVarintEnds(const uint8_t* p, const uint8_t* end);

// Tags that end a message as protobuf reads it, which fails the parse outside a group.
inline bool EndsMessage(uint32_t tag) { return tag == 0 || (tag & 7) == 4; }

}  // namespace fuserank::server::wire

#endif  // FUSERANK_SERVER_WIRE_READER_H_
