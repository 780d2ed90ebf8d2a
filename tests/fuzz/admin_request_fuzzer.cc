// libFuzzer target: the Admin calls' requests as server/admin_requests.h reads them from
// their wire bytes, against protobuf's parse of the same bytes. The first byte picks the
// request whose verdict the seed check reads (modulo 4: SetHotRows, GetHotRows,
// RebuildHotRows, ReloadModel); every check runs on the bytes after it, read as each.
// - ScanSetHotRows, the hand-written scan: wherever protobuf parses the bytes as a
//   SetHotRowsRequest, at capacities on both sides of every table's id count, the scan
//   refuses exactly when some table lists more ids than the capacity, naming the first such
//   table (escaped) and its id count as protobuf read them; so every table's name and count
//   is compared, and the scan never calls parseable bytes no SetHotRowsRequest. Bytes that
//   protobuf refuses the scan may pass (ReadSetHotRows refuses them by size anyway).
// - ReadSetHotRows: within its max_bytes, protobuf's parse field for field, or the refusal
//   naming the type; one byte past it, never OK: the scan's refusal, else one naming the
//   size and cache.hot_rows_per_table, and `out` untouched.
// - ReadSmallAdminRequest: protobuf's parse of GetHotRowsRequest, RebuildHotRowsRequest and
//   ReloadModelRequest, or the refusal naming the type; past kMaxSmallAdminRequestBytes a
//   refusal naming the size (checked once, at start, with a request at the bound).
// Every refusal is INVALID_ARGUMENT with a printable message. The scan reads the fuzzer's
// own buffer, exactly as long as the input, so ASan reports any read past it; the reads
// from grpc::ByteBuffer use one slice or two (WireBytes' copy).
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/escape_text.h"
#include "fuserank/v1/admin.pb.h"
#include "server/admin_requests.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_verdict.h"

namespace fuserank::fuzz {
namespace {

// Small, so that the fuzzer reaches it with short inputs.
constexpr int kCapacity = 4;

// `bytes` as a received message: one slice, or two split at `split` (< bytes.size()).
grpc::ByteBuffer Buffer(absl::string_view bytes, size_t split = 0) {
  std::vector<grpc::Slice> slices;
  if (split == 0 || split >= bytes.size()) {
    slices.emplace_back(bytes.data(), bytes.size());
  } else {
    slices.emplace_back(bytes.data(), split);
    slices.emplace_back(bytes.data() + split, bytes.size() - split);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

void CheckRefusal(const absl::Status& status, absl::string_view what) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument && !status.message().empty() &&
                 engine::IsPrintableUtf8(status.message()),
             absl::StrCat(what, ": ", engine::EscapeText(status.ToString())));
}

bool SameRequest(const v1::SetHotRowsRequest& a, const v1::SetHotRowsRequest& b) {
  if (a.model() != b.model() || a.tables_size() != b.tables_size()) return false;
  for (int t = 0; t < a.tables_size(); ++t) {
    if (a.tables(t).table() != b.tables(t).table()) return false;
    if (a.tables(t).ids_size() != b.tables(t).ids_size()) return false;
    for (int i = 0; i < a.tables(t).ids_size(); ++i) {
      if (a.tables(t).ids(i) != b.tables(t).ids(i)) return false;
    }
  }
  return a.SerializeAsString() == b.SerializeAsString();  // unknown fields too
}

// The scan at `capacity` against protobuf's parse: refused exactly for the first table over
// it, named with the count protobuf read.
void CheckScanAt(absl::string_view bytes, const v1::SetHotRowsRequest& parsed, int capacity) {
  const absl::Status status = server::ScanSetHotRows(bytes, capacity);
  for (const v1::TableHotRows& table : parsed.tables()) {
    if (table.ids_size() <= capacity) continue;
    CheckRefusal(status, "the scan's refusal of a table over capacity");
    const std::string expected =
        absl::StrCat("table '", engine::EscapeText(table.table()), "': ", table.ids_size(),
                     " ids, more than the hot-set capacity ", capacity, " ");
    FUZZ_CHECK(
        absl::StartsWith(status.message(), expected),
        absl::StrCat("capacity ", capacity, ": the scan says '",
                     engine::EscapeText(status.message()), "', protobuf read '", expected, "...'"));
    return;
  }
  FUZZ_CHECK(status.ok(),
             absl::StrCat("capacity ", capacity, ": protobuf parses every table ",
                          "within it, the scan says ", engine::EscapeText(status.ToString())));
}

// Returns what the service would make of the request before the engine sees it: OK when
// protobuf parses it and no table is over kCapacity.
absl::Status CheckSetHotRows(absl::string_view bytes) {
  v1::SetHotRowsRequest parsed;
  const bool parses = parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  const absl::Status scan = server::ScanSetHotRows(bytes, kCapacity);
  if (!scan.ok()) CheckRefusal(scan, "the scan's refusal");
  if (parses) {
    std::set<int> capacities = {0, kCapacity};
    for (const v1::TableHotRows& table : parsed.tables()) {
      capacities.insert(table.ids_size());
      if (table.ids_size() > 0) capacities.insert(table.ids_size() - 1);
    }
    for (int capacity : capacities) CheckScanAt(bytes, parsed, capacity);
  }

  const int64_t size = static_cast<int64_t>(bytes.size());
  v1::SetHotRowsRequest within;
  const absl::Status read = server::ReadSetHotRows(Buffer(bytes), {kCapacity, size}, &within);
  if (parses) {
    FUZZ_CHECK(read.ok() && SameRequest(within, parsed),
               absl::StrCat("within its bound, ReadSetHotRows gives ",
                            engine::EscapeText(read.ToString()), ", not protobuf's parse"));
  } else {
    CheckRefusal(read, "ReadSetHotRows' refusal");
    FUZZ_CHECK(absl::StrContains(read.message(), "no valid fuserank.v1.SetHotRowsRequest"),
               engine::EscapeText(read.ToString()));
  }
  v1::SetHotRowsRequest past;
  const absl::Status over =
      server::ReadSetHotRows(Buffer(bytes, bytes.size() / 2), {kCapacity, size - 1}, &past);
  CheckRefusal(over, "ReadSetHotRows' refusal past its bound");
  if (!scan.ok()) {
    FUZZ_CHECK(over == scan, absl::StrCat("past its bound: ", engine::EscapeText(over.ToString()),
                                          ", the scan: ", engine::EscapeText(scan.ToString())));
  } else {
    FUZZ_CHECK(absl::StrContains(over.message(), absl::StrCat("is ", size, " bytes, more than")) &&
                   absl::StrContains(over.message(), "cache.hot_rows_per_table"),
               absl::StrCat("past its bound: ", engine::EscapeText(over.ToString())));
  }
  FUZZ_CHECK(past.ByteSizeLong() == 0, "ReadSetHotRows past its bound filled the request");
  return parses ? scan : read;
}

// ReadSmallAdminRequest as message type M against protobuf's parse; returns its status.
template <typename M>
absl::Status CheckSmall(absl::string_view bytes, absl::string_view method) {
  M parsed;
  const bool parses = parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  M out;
  const absl::Status status =
      server::ReadSmallAdminRequest(Buffer(bytes, bytes.size() / 3), method, &out);
  if (parses) {
    FUZZ_CHECK(status.ok() && out.SerializeAsString() == parsed.SerializeAsString(),
               absl::StrCat(method, ": ", engine::EscapeText(status.ToString()),
                            ", not protobuf's parse"));
    return status;
  }
  CheckRefusal(status, method);
  FUZZ_CHECK(absl::StrContains(status.message(), absl::StrCat("no valid ", parsed.GetTypeName())),
             engine::EscapeText(status.ToString()));
  return status;
}

// The size bound of the small requests, at it and one byte past it.
void CheckSmallBound() {
  const int64_t bound = server::kMaxSmallAdminRequestBytes;
  v1::GetHotRowsRequest at_bound;
  at_bound.add_tables(std::string(static_cast<size_t>(bound) - 4, 'a'));  // tag, 3-byte length
  const std::string bytes = at_bound.SerializeAsString();
  FUZZ_CHECK(static_cast<int64_t>(bytes.size()) == bound, absl::StrCat(bytes.size(), " bytes"));
  v1::GetHotRowsRequest out;
  const absl::Status at = server::ReadSmallAdminRequest(Buffer(bytes), "GetHotRows", &out);
  FUZZ_CHECK(at.ok() && out.tables(0) == at_bound.tables(0), at.ToString());
  const absl::Status past = server::ReadSmallAdminRequest(Buffer(bytes + "x"), "GetHotRows", &out);
  CheckRefusal(past, "past the small requests' bound");
  FUZZ_CHECK(absl::StrContains(past.message(), absl::StrCat(bound + 1, " bytes, more than")),
             past.ToString());
}

}  // namespace
}  // namespace fuserank::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuserank;  // NOLINT: one function
  static const bool bound_checked = (fuzz::CheckSmallBound(), true);
  (void)bound_checked;
  const int which = size == 0 ? 0 : data[0] % 4;
  static const char kNothing[1] = "";  // never a null pointer, which memcpy may not take
  const absl::string_view bytes =
      size == 0 ? absl::string_view(kNothing, 0)
                : absl::string_view(reinterpret_cast<const char*>(data) + 1, size - 1);
  const absl::Status verdicts[4] = {
      fuzz::CheckSetHotRows(bytes),
      fuzz::CheckSmall<v1::GetHotRowsRequest>(bytes, "GetHotRows"),
      fuzz::CheckSmall<v1::RebuildHotRowsRequest>(bytes, "RebuildHotRows"),
      fuzz::CheckSmall<v1::ReloadModelRequest>(bytes, "ReloadModel"),
  };
  fuzz::FuzzVerdict(verdicts[which].ok(), verdicts[which].message());
  return 0;
}
