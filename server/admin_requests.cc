#include "server/admin_requests.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/escape_text.h"
#include "server/wire_bytes.h"
#include "server/wire_reader.h"

namespace fuserank::server {
namespace {

constexpr uint32_t kTablesTag = (1 << 3) | 2;     // SetHotRowsRequest.tables
constexpr uint32_t kNameTag = (1 << 3) | 2;       // TableHotRows.table
constexpr uint32_t kPackedIdsTag = (2 << 3) | 2;  // TableHotRows.ids, packed
constexpr uint32_t kIdTag = (2 << 3) | 0;         // TableHotRows.ids, one id

absl::Status NotA(absl::string_view method, absl::string_view type) {
  return absl::InvalidArgumentError(absl::StrCat("the ", method, " request is no valid ", type,
                                                 " (protobuf cannot parse its bytes)"));
}

absl::Status NoSetHotRows() { return NotA("SetHotRows", "fuserank.v1.SetHotRowsRequest"); }

// One TableHotRows: its ids against the capacity.
absl::Status ScanTable(wire::Reader in, int capacity) {
  absl::string_view name;
  int64_t ids = 0;
  while (!in.done()) {
    uint32_t tag = 0;
    uint32_t length = 0;
    if (!in.Tag(&tag)) return NoSetHotRows();
    if (tag == kNameTag || tag == kPackedIdsTag) {
      if (!in.Length(&length)) return NoSetHotRows();
      const wire::Reader field = in.Sub(length);
      if (tag == kNameTag) {
        name = absl::string_view(reinterpret_cast<const char*>(field.p), length);
      } else {
        ids += wire::CountVarintEnds(field.p, field.end);
      }
    } else if (tag == kIdTag) {
      uint64_t id = 0;
      if (!in.Varint(&id)) return NoSetHotRows();
      ++ids;
    } else if (wire::EndsMessage(tag) || !wire::SkipField(&in, tag, wire::kRecursionLimit - 1)) {
      return NoSetHotRows();
    }
  }
  if (ids <= capacity) return absl::OkStatus();
  // The engine's words (hot_rows.h: CheckHotIdCount), which it says of smaller calls.
  return absl::InvalidArgumentError(absl::StrCat(
      "table '", engine::EscapeText(name), "': ", ids, " ids, more than the hot-set capacity ",
      capacity, " (cache.hot_rows_per_table); send at most that many, each id once"));
}

}  // namespace

absl::Status ScanSetHotRows(absl::string_view bytes, int hot_rows_per_table) {
  const auto* begin = reinterpret_cast<const uint8_t*>(bytes.data());
  wire::Reader in{begin, begin + bytes.size()};
  while (!in.done()) {
    uint32_t tag = 0;
    if (!in.Tag(&tag)) return NoSetHotRows();
    if (tag == kTablesTag) {
      uint32_t length = 0;
      if (!in.Length(&length)) return NoSetHotRows();
      const absl::Status table = ScanTable(in.Sub(length), hot_rows_per_table);
      if (!table.ok()) return table;
    } else if (wire::EndsMessage(tag) || !wire::SkipField(&in, tag, wire::kRecursionLimit)) {
      return NoSetHotRows();
    }
  }
  return absl::OkStatus();
}

absl::Status ReadSetHotRows(const grpc::ByteBuffer& bytes, const SetHotRowsBounds& bounds,
                            v1::SetHotRowsRequest* out) {
  const WireBytes wire(bytes);
  if (static_cast<int64_t>(wire.view().size()) > bounds.max_bytes) {
    // Too large to parse: the scan names a table over capacity where there is one. Within
    // the bound the request is parsed and the engine answers, an unknown model or table
    // (NOT_FOUND) before a capacity (SPEC 3).
    const absl::Status scanned = ScanSetHotRows(wire.view(), bounds.hot_rows_per_table);
    if (!scanned.ok()) return scanned;
    return absl::InvalidArgumentError(
        absl::StrCat("the SetHotRows request is ", wire.view().size(),
                     " bytes, more than the largest the served models need (", bounds.max_bytes,
                     " bytes: cache.hot_rows_per_table ", bounds.hot_rows_per_table,
                     " ids in each of their tables, and the names); list each table once"));
  }
  if (!out->ParseFromArray(wire.view().data(), static_cast<int>(wire.view().size()))) {
    return NoSetHotRows();
  }
  return absl::OkStatus();
}

absl::Status ReadSmallAdminRequest(const grpc::ByteBuffer& bytes, absl::string_view method,
                                   google::protobuf::MessageLite* out) {
  const size_t size = bytes.Length();
  if (static_cast<int64_t>(size) > kMaxSmallAdminRequestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", method, " request is ", size, " bytes, more than any needs (",
                     kMaxSmallAdminRequestBytes, " bytes: table names, a model name, a path)"));
  }
  const WireBytes wire(bytes);
  if (!out->ParseFromArray(wire.view().data(), static_cast<int>(wire.view().size()))) {
    return NotA(method, out->GetTypeName());
  }
  return absl::OkStatus();
}

}  // namespace fuserank::server
