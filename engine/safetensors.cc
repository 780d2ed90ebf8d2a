// Safetensors reader (the writer is in safetensors_writer.cc). The JSON header is read by a small
// parser that accepts exactly the shape the format defines (an object of tensor objects plus an
// optional
// "__metadata__" object of strings), so there is no JSON dependency and every
// malformed header gets a message with the byte position.
#include "engine/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/escape_text.h"
#include "engine/status_macros.h"
#include "engine/tensor_shape.h"

namespace fuserank::engine {
namespace {

// Names and strings of the header quoted back in messages are escaped and cut to this.
constexpr size_t kQuoted = 128;

std::string Quote(absl::string_view text) { return EscapeText(text, kQuoted); }

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

// Checks one tensor's dtype and extent against the data section of `data_size` bytes.
absl::Status CheckTensor(const RawTensor& t, uint64_t data_size) {
  const size_t element = SafetensorsDTypeSize(t.dtype);
  if (element == 0)
    return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", Quote(t.dtype), "'"));
  uint64_t elements = 0, bytes = 0;
  if (!NumElements(t.shape, &elements) || __builtin_mul_overflow(elements, element, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeString(t.shape), " overflows"));
  }
  if (t.end < t.begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_offsets [", t.begin, ", ", t.end, "] end before they begin"));
  }
  if (t.end > data_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_offsets [", t.begin, ", ", t.end, "] run past the data section (",
                     data_size, " bytes): the file is truncated or the offsets are wrong"));
  }
  if (t.end - t.begin != bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_offsets [", t.begin, ", ", t.end, "] hold ", t.end - t.begin,
                     " bytes, but ", t.dtype, " ", ShapeString(t.shape), " needs ", bytes));
  }
  return absl::OkStatus();
}

}  // namespace

size_t SafetensorsDTypeSize(std::string_view dtype) {
  static const std::map<std::string_view, size_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

std::string_view SafetensorsDType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kInt8:
      return "I8";
  }
  return "?";
}

absl::StatusOr<std::map<std::string, SafetensorsEntry>> ParseSafetensorsHeader(
    std::string_view json, size_t max_tensors) {
  std::map<std::string, RawTensor> raw;
  RETURN_IF_ERROR(
      HeaderParser(absl::string_view(json.data(), json.size()), max_tensors).Parse(&raw, nullptr));
  return raw;
}

absl::StatusOr<TensorMap> ParseSafetensors(const std::byte* data, size_t size,
                                           std::map<std::string, std::string>* metadata,
                                           size_t max_tensors) {
  if (size < 8) {
    return absl::InvalidArgumentError(absl::StrCat("not a safetensors file: ", size,
                                                   " bytes, shorter than the 8-byte header "
                                                   "length"));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | std::to_integer<uint64_t>(data[i]);
  if (header_len > size - 8) {
    return absl::InvalidArgumentError(absl::StrCat("header length ", header_len,
                                                   " runs past the end of the file (", size,
                                                   " bytes): truncated or not safetensors"));
  }
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header length ", header_len, " exceeds the limit of ", kMaxSafetensorsHeaderBytes));
  }
  absl::string_view header(reinterpret_cast<const char*>(data + 8), header_len);
  std::map<std::string, RawTensor> raw;
  RETURN_IF_ERROR(HeaderParser(header, max_tensors).Parse(&raw, metadata));

  const std::byte* base = data + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::vector<std::pair<uint64_t, const std::string*>> extents;  // non-empty tensors by begin
  TensorMap tensors;
  for (const auto& [name, t] : raw) {
    RETURN_IF_ERROR(
        WithContext(CheckTensor(t, data_size), absl::StrCat("tensor '", Quote(name), "'")));
    if (t.end > t.begin) extents.emplace_back(t.begin, &name);
    TensorView& view = tensors[name];
    view.dtype = t.dtype;
    view.shape = t.shape;
    view.data = base + t.begin;
    view.nbytes = t.end - t.begin;
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i) {
    const RawTensor& prev = raw.at(*extents[i - 1].second);
    if (extents[i].first < prev.end) {
      return absl::InvalidArgumentError(absl::StrCat("tensors '", Quote(*extents[i - 1].second),
                                                     "' and '", Quote(*extents[i].second),
                                                     "' overlap in the data section"));
    }
  }
  return tensors;
}

}  // namespace fuserank::engine
