#include "engine/escape_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace fuserank::engine {
namespace {

void AppendHex(unsigned char byte, std::string* out) {
  char buffer[5];
  std::snprintf(buffer, sizeof(buffer), "\\x%02x", byte);
  out->append(buffer, 4);
}

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

size_t Utf8SequenceLength(absl::string_view text) {
  if (text.empty()) return 0;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t min = 0;
  uint32_t cp = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, min = 0x80, cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, min = 0x800, cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, min = 0x10000, cp = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if (!IsContinuation(byte(i))) return 0;
    cp = (cp << 6) | (byte(i) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0;
  return length;
}

bool IsPrintableUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const size_t length = Utf8SequenceLength(text.substr(i));
    if (length == 0 || (length == 1 && (c < 0x20 || c == 0x7F))) return false;
    if (length == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) return false;
    i += length;
  }
  return true;
}

std::string EscapeText(absl::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 8);
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t length = Utf8SequenceLength(text.substr(i));
    if (length == 0) length = 1;  // an invalid byte: escaped alone
    if (i + length > max_bytes) break;
    if (length > 1) {
      // C1 controls (U+0080..U+009F) are escaped like C0.
      const bool c1 = c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0;
      if (c1) {
        AppendHex(c, &out);
        AppendHex(static_cast<unsigned char>(text[i + 1]), &out);
      } else {
        out.append(text.data() + i, length);
      }
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c >= 0x7F) {
      AppendHex(c, &out);
    } else {
      out.push_back(static_cast<char>(c));
    }
    i += length;
  }
  if (i < text.size()) out += "...";
  return out;
}

}  // namespace fuserank::engine
