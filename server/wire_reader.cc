#include "server/wire_reader.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace fuserank::server::wire {
namespace {

// The fields of a group up to its end tag, which must close `start_tag`'s group.
bool SkipGroup(Reader* in, uint32_t start_tag, int depth) {
  if (depth < 0) return false;
  while (!in->done()) {
    uint32_t tag = 0;
    if (!in->Tag(&tag)) return false;
    if (tag == 0 || (tag & 7) == 4) return tag == start_tag + 1;
    if (!SkipField(in, tag, depth)) return false;
  }
  return false;  // the message ended inside the group
}

}  // namespace

// 16 bytes at a time (SSE2, which every x86-64 has): the bytes with the high bit set are
// the mask's.
int64_t CountVarintEnds(const uint8_t* p, const uint8_t* end) {
  int64_t count = 0;
#if defined(__SSE2__)
  for (; end - p >= 16; p += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    count += 16 - __builtin_popcount(static_cast<unsigned>(_mm_movemask_epi8(bytes)));
  }
#endif
  for (; p != end; ++p) count += *p < 0x80;
  return count;
}

bool IsUtf8(const uint8_t* p, const uint8_t* end) {
  while (p != end) {
    const uint8_t c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int tail = 0;
    uint8_t lo = 0x80, hi = 0xbf;  // the range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      tail = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      tail = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      tail = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (end - p <= tail) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (int i = 2; i <= tail; ++i) {
      if (p[i] < 0x80 || p[i] > 0xbf) return false;
    }
    p += tail + 1;
  }
  return true;
}

bool String(Reader* in, absl::string_view* out) {
  uint32_t length = 0;
  if (!in->Length(&length)) return false;
  const uint8_t* begin = in->p;
  in->p += length;
  *out = absl::string_view(reinterpret_cast<const char*>(begin), length);
  return IsUtf8(begin, in->p);
}

bool SkipField(Reader* in, uint32_t tag, int depth) {
  if ((tag >> 3) == 0) return false;
  switch (tag & 7) {
    case 0: {
      uint64_t value = 0;
      return in->Varint(&value);
    }
    case 1:
      return in->Skip(8);
    case 2: {
      uint32_t length = 0;
      return in->Length(&length) && in->Skip(length);
    }
    case 3:
      return SkipGroup(in, tag, depth - 1);
    case 5:
      return in->Skip(4);
    default:  // 4: an end-group with no group open; 6 and 7 are no wire type
      return false;
  }
}

}  // namespace fuserank::server::wire
