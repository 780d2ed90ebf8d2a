// libFuzzer target: ParseSafetensors on any bytes. It must never crash or read outside
// the input; on success every view lies inside the data section (after the header), holds
// dtype size x elements bytes, and no two views overlap. Inputs that start with '{' get
// their header length prepended (see LLVMFuzzerTestOneInput).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/safetensors.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_verdict.h"

volatile uint8_t g_sink = 0;

namespace {

// Parses one file image and checks what ParseSafetensors made of it.
void CheckFile(const uint8_t* data, size_t size) {
  using namespace fuserank;
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  std::map<std::string, std::string> metadata;
  absl::StatusOr<engine::TensorMap> tensors = engine::ParseSafetensors(bytes, size, &metadata);
  fuzz::FuzzVerdict(tensors.ok(), tensors.status().message());
  if (!tensors.ok()) {
    FUZZ_CHECK(tensors.status().code() == absl::StatusCode::kInvalidArgument,
               tensors.status().ToString());
    FUZZ_CHECK(!tensors.status().message().empty(), "an error without a message");
    return;
  }
  FUZZ_CHECK(size >= 8, absl::StrCat("accepted ", size, " bytes"));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  FUZZ_CHECK(header_len <= size - 8, absl::StrCat("header length ", header_len));
  const std::byte* section = bytes + 8 + header_len;
  const std::byte* end = bytes + size;

  std::vector<std::pair<const std::byte*, const std::byte*>> extents;
  uint8_t checksum = 0;
  for (const auto& [name, view] : *tensors) {
    const size_t element = engine::SafetensorsDTypeSize(view.dtype);
    FUZZ_CHECK(element > 0, absl::StrCat("tensor '", name, "': unknown dtype '", view.dtype, "'"));
    uint64_t elements = 1;
    for (int64_t d : view.shape) {
      FUZZ_CHECK(d >= 0, absl::StrCat("tensor '", name, "': negative dimension ", d));
      FUZZ_CHECK(d == 0 || elements <= UINT64_MAX / static_cast<uint64_t>(d),
                 absl::StrCat("tensor '", name, "': element count overflows"));
      elements *= static_cast<uint64_t>(d);
    }
    FUZZ_CHECK(elements <= UINT64_MAX / element && elements * element == view.nbytes,
               absl::StrCat("tensor '", name, "': ", view.nbytes, " bytes for ", elements,
                            " elements of ", view.dtype));
    FUZZ_CHECK(view.data >= section && view.data <= end &&
                   view.nbytes <= static_cast<size_t>(end - view.data),
               absl::StrCat("tensor '", name, "' lies outside the data section"));
    // Read every byte: ASan reports any view that escapes the input buffer.
    for (size_t i = 0; i < view.nbytes; ++i) checksum ^= std::to_integer<uint8_t>(view.data[i]);
    if (view.nbytes > 0) extents.emplace_back(view.data, view.data + view.nbytes);
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i) {
    FUZZ_CHECK(extents[i - 1].second <= extents[i].first, "two tensors overlap");
  }
  g_sink = checksum;  // keeps the reads from being optimised away
}

}  // namespace

// An input is a safetensors file, or, when it starts with '{', a bare JSON header (up to and
// including its last '}') followed by the data: the 8-byte header length is then prepended
// here, so that mutations of the JSON are not all spoilt by a length that no longer matches.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || data[0] != '{') {
    CheckFile(data, size);
    return 0;
  }
  size_t header = size;
  while (header > 0 && data[header - 1] != '}') --header;  // 0 when there is no '}'
  // An exact-size heap copy, so ASan still catches any read past the end.
  std::vector<uint8_t> file(8 + size);
  for (int i = 0; i < 8; ++i) {
    file[i] = static_cast<uint8_t>(static_cast<uint64_t>(header) >> (8 * i));
  }
  std::copy(data, data + size, file.begin() + 8);
  CheckFile(file.data(), file.size());
  return 0;
}
