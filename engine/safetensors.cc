// Safetensors reader (the writer is in safetensors_writer.cc, the JSON header's parser in
// safetensors_header.cc): the header length, the tensors' extents against the data section.
#include "engine/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/safetensors_header.h"
#include "engine/status_macros.h"
#include "engine/tensor_shape.h"

namespace fuserank::engine {
namespace {

std::string Quote(absl::string_view text) { return QuoteHeaderText(text); }

using RawTensor = SafetensorsEntry;

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
  RETURN_IF_ERROR(ParseHeaderJson(header, max_tensors, &raw, metadata));

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
