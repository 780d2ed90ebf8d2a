#include "engine/safetensors_header.h"

#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/escape_text.h"
#include "engine/status_macros.h"

namespace fuserank::engine {
namespace {

std::string Quote(absl::string_view text) { return QuoteHeaderText(text); }

using RawTensor = SafetensorsEntry;

class HeaderParser {
 public:
  HeaderParser(absl::string_view text, size_t max_tensors)
      : text_(text), max_tensors_(max_tensors) {}

  absl::Status Parse(std::map<std::string, RawTensor>* tensors,
                     std::map<std::string, std::string>* metadata) {
    SkipSpace();
    RETURN_IF_ERROR(Expect('{'));
    SkipSpace();
    if (!Consume('}')) {
      do {
        SkipSpace();
        std::string name;
        RETURN_IF_ERROR(String(&name));
        SkipSpace();
        RETURN_IF_ERROR(Expect(':'));
        SkipSpace();
        if (name == "__metadata__") {
          RETURN_IF_ERROR(Metadata(metadata));
        } else {
          if (tensors->size() == max_tensors_) {
            return absl::InvalidArgumentError(absl::StrCat("the header describes more than ",
                                                           max_tensors_, " tensors (the limit)"));
          }
          RawTensor tensor;
          RETURN_IF_ERROR(WithContext(Tensor(&tensor), absl::StrCat("tensor '", Quote(name), "'")));
          if (!tensors->emplace(name, std::move(tensor)).second) {
            return Error(absl::StrCat("tensor '", Quote(name), "' appears twice"));
          }
        }
        SkipSpace();
      } while (Consume(','));
      RETURN_IF_ERROR(Expect('}'));
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the header object");
    return absl::OkStatus();
  }

 private:
  absl::Status Tensor(RawTensor* out) {
    RETURN_IF_ERROR(Expect('{'));
    bool has_dtype = false, has_shape = false, has_offsets = false;
    SkipSpace();
    if (!Consume('}')) {
      do {
        SkipSpace();
        std::string key;
        RETURN_IF_ERROR(String(&key));
        SkipSpace();
        RETURN_IF_ERROR(Expect(':'));
        SkipSpace();
        std::vector<uint64_t> list;
        if ((key == "dtype" && has_dtype) || (key == "shape" && has_shape) ||
            (key == "data_offsets" && has_offsets)) {
          return Error(absl::StrCat("\"", key, "\" given twice"));
        }
        if (key == "dtype") {
          RETURN_IF_ERROR(String(&out->dtype));
          has_dtype = true;
        } else if (key == "shape") {
          RETURN_IF_ERROR(UintList(&list, kMaxSafetensorsDims,
                                   absl::StrCat("shape has more than ", kMaxSafetensorsDims,
                                                " dimensions (the limit)")));
          for (uint64_t d : list) {
            if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
              return Error("shape dimension too large");
            }
            out->shape.push_back(static_cast<int64_t>(d));
          }
          has_shape = true;
        } else if (key == "data_offsets") {
          RETURN_IF_ERROR(UintList(&list, 2, "data_offsets must be [begin, end]"));
          if (list.size() != 2) return Error("data_offsets must be [begin, end]");
          out->begin = list[0];
          out->end = list[1];
          has_offsets = true;
        } else {
          return Error(absl::StrCat("unknown key '", Quote(key), "'"));
        }
        SkipSpace();
      } while (Consume(','));
      RETURN_IF_ERROR(Expect('}'));
    }
    if (!has_dtype) return Error("missing \"dtype\"");
    if (!has_shape) return Error("missing \"shape\"");
    if (!has_offsets) return Error("missing \"data_offsets\"");
    return absl::OkStatus();
  }

  absl::Status Metadata(std::map<std::string, std::string>* metadata) {
    RETURN_IF_ERROR(Expect('{'));
    SkipSpace();
    if (Consume('}')) return absl::OkStatus();
    do {
      SkipSpace();
      std::string key, value;
      RETURN_IF_ERROR(String(&key));
      SkipSpace();
      RETURN_IF_ERROR(Expect(':'));
      SkipSpace();
      RETURN_IF_ERROR(WithContext(String(&value), "__metadata__ values must be strings"));
      if (metadata != nullptr) (*metadata)[key] = value;
      SkipSpace();
    } while (Consume(','));
    return Expect('}');
  }

  // A list of at most `max` integers; `too_long` is the message for a longer one.
  absl::Status UintList(std::vector<uint64_t>* out, size_t max, absl::string_view too_long) {
    RETURN_IF_ERROR(Expect('['));
    SkipSpace();
    if (Consume(']')) return absl::OkStatus();
    do {
      SkipSpace();
      if (out->size() == max) return Error(too_long);
      uint64_t value = 0;
      RETURN_IF_ERROR(Uint(&value));
      out->push_back(value);
      SkipSpace();
    } while (Consume(','));
    return Expect(']');
  }

  absl::Status Uint(uint64_t* out) {
    const size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const uint64_t digit = text_[pos_] - '0';
      if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
        return Error("integer too large");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) return Error("expected a non-negative integer");
    if (pos_ < text_.size() && std::strchr(".eE-+", text_[pos_]) != nullptr) {
      return Error("expected a non-negative integer");
    }
    if (text_[start] == '0' && pos_ - start > 1) return Error("integer with a leading zero");
    *out = value;
    return absl::OkStatus();
  }

  absl::Status String(std::string* out) {
    RETURN_IF_ERROR(Expect('"'));
    out->clear();
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in a string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) break;
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u':
          RETURN_IF_ERROR(Unicode(out));
          break;
        default:
          return Error("bad escape in a string");
      }
    }
    return Error("unterminated string");
  }

  absl::Status Hex4(uint32_t* out) {
    if (text_.size() - pos_ < 4) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return Error("bad \\u escape");
    }
    *out = v;
    return absl::OkStatus();
  }

  absl::Status Unicode(std::string* out) {
    uint32_t cp = 0;
    RETURN_IF_ERROR(Hex4(&cp));
    if (cp >= 0xD800 && cp < 0xDC00) {  // high surrogate: a low one must follow
      uint32_t low = 0;
      if (!(Consume('\\') && Consume('u'))) return Error("unpaired surrogate");
      RETURN_IF_ERROR(Hex4(&low));
      if (low < 0xDC00 || low >= 0xE000) return Error("unpaired surrogate");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) {
      return Error("unpaired surrogate");
    }
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    return absl::OkStatus();
  }

  void SkipSpace() {
    while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) != nullptr &&
           text_[pos_] != '\0') {
      ++pos_;
    }
  }
  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  absl::Status Expect(char c) {
    if (Consume(c)) return absl::OkStatus();
    if (pos_ >= text_.size())
      return Error(absl::StrCat("expected '", std::string(1, c), "', got the end of the header"));
    // The byte found is not quoted: the file could be anything (no file bytes in messages).
    return Error(absl::StrCat("expected '", std::string(1, c), "'"));
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON header at byte ", pos_, ": ", what));
  }

  absl::string_view text_;
  const size_t max_tensors_;
  size_t pos_ = 0;
};

}  // namespace

std::string QuoteHeaderText(absl::string_view text) { return EscapeText(text, 128); }

absl::Status ParseHeaderJson(absl::string_view json, size_t max_tensors,
                             std::map<std::string, SafetensorsEntry>* tensors,
                             std::map<std::string, std::string>* metadata) {
  return HeaderParser(json, max_tensors).Parse(tensors, metadata);
}

absl::StatusOr<std::map<std::string, SafetensorsEntry>> ParseSafetensorsHeader(
    std::string_view json, size_t max_tensors) {
  std::map<std::string, RawTensor> raw;
  RETURN_IF_ERROR(
      ParseHeaderJson(absl::string_view(json.data(), json.size()), max_tensors, &raw, nullptr));
  return raw;
}

}  // namespace fuserank::engine
