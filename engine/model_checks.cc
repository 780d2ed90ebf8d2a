#include "engine/model_checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/escape_text.h"
#include "engine/model_memory.h"
#include "engine/model_types.h"
#include "engine/safetensors.h"
#include "engine/status_macros.h"

namespace fuserank::engine {
namespace {

std::string Describe(absl::string_view dtype, const std::vector<int64_t>& shape) {
  return absl::StrCat(dtype, " [", absl::StrJoin(shape, ", "), "]");
}

bool NonFinite(uint32_t bits, uint32_t exponent) { return (bits & exponent) == exponent; }

// Index of the first NaN or Inf among `n` elements of `dtype` at `data`, or -1. Blocks are
// scanned without branches so that a clean table (the usual case) streams at memory speed.
int64_t FirstNonFinite(const std::byte* data, size_t n, DType dtype) {
  if (dtype == DType::kInt8) return -1;
  const size_t width = DTypeBytes(dtype);
  const uint32_t exponent = dtype == DType::kF32   ? 0x7F800000u
                            : dtype == DType::kF16 ? 0x7C00u
                                                   : 0x7F80u;
  auto element = [&](size_t i) -> uint32_t {
    if (width == 4) {
      uint32_t v;
      std::memcpy(&v, data + 4 * i, 4);
      return v;
    }
    uint16_t v;
    std::memcpy(&v, data + 2 * i, 2);
    return v;
  };
  constexpr size_t kBlock = 4096;
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
    bool any = false;
    for (size_t i = begin; i < end; ++i) any |= NonFinite(element(i), exponent);
    if (!any) continue;
    for (size_t i = begin; i < end; ++i) {
      if (NonFinite(element(i), exponent)) return static_cast<int64_t>(i);
    }
  }
  return -1;
}

}  // namespace

std::string NonFiniteTableProblem(const EmbeddingTable& table) {
  const size_t n = static_cast<size_t>(table.rows) * table.dim;
  const int64_t bad = FirstNonFinite(table.data, n, table.dtype);
  if (bad >= 0) {
    return absl::StrCat("table '", table.name, "': row ", bad / table.dim,
                        " holds a NaN or Inf (element ", bad % table.dim, ")");
  }
  if (table.qparams == nullptr) return "";
  for (int64_t r = 0; r < table.rows; ++r) {
    const float scale = table.qparams[2 * r], bias = table.qparams[2 * r + 1];
    // value = scale * q + bias for q in [-128, 127]: every value must be finite too.
    if (!std::isfinite(std::abs(scale) * 128.0f + std::abs(bias))) {
      return absl::StrCat("table '", table.name, "': row ", r, ": qparams (scale ", scale,
                          ", bias ", bias, ") give values that are not finite");
    }
  }
  return "";
}

size_t MaxWeightsTensors(const ModelSpec& spec) {
  return std::max(kMaxSafetensorsTensors, SpecTensors(spec).size());
}

absl::Status CheckModelMemory(const ModelSpec& spec, uint64_t file_bytes, uint64_t max_bytes,
                              uint64_t copied_bytes) {
  if (max_bytes == 0) return absl::OkStatus();
  const ModelMemory memory = EstimateModelMemory(spec, file_bytes, ServingShape{}, copied_bytes);
  if (memory.model() <= max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the model needs ", FormatBytes(memory.model()), " (weights ", FormatBytes(memory.weights),
      ", dense layers ", FormatBytes(memory.dense),
      memory.copies > 0 ? absl::StrCat(", misaligned tables copied ", FormatBytes(memory.copies))
                        : "",
      "), more than the limit of ", FormatBytes(max_bytes), " (", max_bytes, " bytes)"));
}

namespace {

// Checks the weights file against the spec before it is read: a header length within the
// format's limit, and no more bytes than that header and the spec's tensors take (a valid
// file holds exactly those). A smaller file is read (it is small) so that the tensor
// checks can say which tensor is short.
absl::Status CheckWeightsSize(const RegularFile& file, uint64_t header_len, uint64_t tensors) {
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header length ", header_len, " exceeds the limit of ", kMaxSafetensorsHeaderBytes));
  }
  const uint64_t expected = 8 + header_len + tensors;  // tensors saturate far below 2^64
  if (file.size() > expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the file is ", file.size(), " bytes, ", file.size() - expected, " more than its header (",
        8 + header_len, " bytes) and the spec's tensors (", tensors,
        " bytes) take: a tensor is larger than the spec says, or these are not the weights of "
        "this spec"));
  }
  return absl::OkStatus();
}

// The tensors of the header whose dtype or shape differs from the spec's, for the message
// of a file whose size the spec does not explain (the header is read, never the data).
// REQUIRES: header_len <= kMaxSafetensorsHeaderBytes.
std::string ShapeMismatches(const RegularFile& file, uint64_t header_len, const ModelSpec& spec) {
  if (header_len > file.size() - 8) return "";
  std::string header(static_cast<size_t>(header_len), '\0');
  if (!file.ReadAt(8, header_len, header.data()).ok()) return "";
  absl::StatusOr<std::map<std::string, SafetensorsEntry>> entries =
      ParseSafetensorsHeader(header, MaxWeightsTensors(spec));
  if (!entries.ok()) return "";
  std::vector<std::string> problems;
  for (const SpecTensor& want : SpecTensors(spec)) {
    auto it = entries->find(want.name);
    if (it == entries->end()) {
      problems.push_back(absl::StrCat("tensor '", want.name, "' is missing"));
    } else if (it->second.dtype != want.dtype || it->second.shape != want.shape) {
      problems.push_back(
          absl::StrCat("tensor '", want.name, "': expected ", Describe(want.dtype, want.shape),
                       ", got ", Describe(EscapeText(it->second.dtype, 16), it->second.shape)));
    }
    if (problems.size() == 5) break;
  }
  return problems.empty() ? "" : absl::StrCat("; ", absl::StrJoin(problems, "; "));
}

}  // namespace

uint64_t MisalignedWeightsBytes(const OpenedWeights& weights, const ModelSpec& spec) {
  const RegularFile& file = weights.file;
  if (weights.header_len > kMaxSafetensorsHeaderBytes || weights.header_len > file.size() - 8) {
    return 0;
  }
  std::string header(static_cast<size_t>(weights.header_len), '\0');
  if (!file.ReadAt(8, weights.header_len, header.data()).ok()) return 0;
  absl::StatusOr<std::map<std::string, SafetensorsEntry>> entries =
      ParseSafetensorsHeader(header, MaxWeightsTensors(spec));
  return entries.ok() ? MisalignedTableBytes(spec, *entries) : 0;
}

absl::StatusOr<OpenedWeights> OpenWeights(const ModelSpec& spec) {
  const std::string& path = spec.weights_path;
  ASSIGN_OR_RETURN(RegularFile file, RegularFile::Open(path, "weights"));
  if (file.size() < 8) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a safetensors file: ", file.size(),
                                                   " bytes, shorter than the 8-byte header "
                                                   "length"));
  }
  unsigned char length[8];
  RETURN_IF_ERROR(WithContext(file.ReadAt(0, 8, length), path));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | length[i];
  const absl::Status size = CheckWeightsSize(file, header_len, SpecTensorBytes(spec));
  if (!size.ok()) {
    // A header over the limit is never read: its length alone is the whole problem.
    const std::string mismatches =
        header_len <= kMaxSafetensorsHeaderBytes ? ShapeMismatches(file, header_len, spec) : "";
    return absl::Status(size.code(), absl::StrCat(path, ": ", size.message(), mismatches));
  }
  return OpenedWeights{std::move(file), header_len};
}

}  // namespace fuserank::engine
