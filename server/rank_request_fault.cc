#include "server/rank_request_fault.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "server/rank_request_tags.h"
#include "server/wire_reader.h"

namespace fuserank::server {
namespace {

using wire::Reader;

// Of a field: a string, one varint, repeated varints (packed or not), repeated floats, a
// repeated message.
enum class Kind { kString, kVarint, kVarints, kFloats, kFeature, kCandidate };
enum class Message { kRequest, kCandidate, kFeature };

struct FieldInfo {
  int number;
  const char* name;
  Kind kind;
};

// RankRequest, Candidate and Feature of proto/fuserank/v1/ranker.proto (the tags of
// rank_request_tags.h, by field number).
constexpr FieldInfo kRequestFields[] = {
    {tags::kRequestId >> 3, "request_id", Kind::kString},
    {tags::kUserFeatures >> 3, "user_features", Kind::kFeature},
    {tags::kUserDense >> 3, "user_dense", Kind::kFloats},
    {tags::kCandidates >> 3, "candidates", Kind::kCandidate},
    {tags::kTopK >> 3, "top_k", Kind::kVarint},
    {tags::kModel >> 3, "model", Kind::kString},
};
constexpr FieldInfo kCandidateFields[] = {
    {tags::kItemId >> 3, "item_id", Kind::kVarint},
    {tags::kCandidateFeatures >> 3, "features", Kind::kFeature},
    {tags::kDense >> 3, "dense", Kind::kFloats},
};
constexpr FieldInfo kFeatureFields[] = {
    {tags::kName >> 3, "name", Kind::kString},
    {tags::kIds >> 3, "ids", Kind::kVarints},
    {tags::kWeights >> 3, "weights", Kind::kFloats},
};

constexpr uint32_t kVarintType = 0, kFixed32Type = 5, kDelimitedType = 2;

template <size_t N>
const FieldInfo* Find(const FieldInfo (&fields)[N], uint32_t number) {
  for (const FieldInfo& field : fields) {
    if (static_cast<uint32_t>(field.number) == number) return &field;
  }
  return nullptr;
}

bool Repeated(Kind kind) { return kind == Kind::kFeature || kind == Kind::kCandidate; }

// Where a field sits ("candidates[3].features[1].name"), as links up to the request,
// turned into text only for the fault found: a walk over millions of fields allocates
// nothing.
struct Path {
  const Path* parent;  // null: a field of the request
  const FieldInfo* field;
  int index;  // of a repeated message; -1 otherwise
};

std::string Text(const Path* path) {
  if (path == nullptr) return "the request";
  std::string text = path->parent == nullptr ? "" : absl::StrCat(Text(path->parent), ".");
  absl::StrAppend(&text, path->field->name);
  if (path->index >= 0) absl::StrAppend(&text, "[", path->index, "]");
  return text;
}

std::string Walk(Reader in, int depth, const Path* path, Message message);

// The fault of the field whose tag was just read (a known field of the wire type it
// expects), or "".
std::string Field(Reader* in, uint32_t wire_type, int depth, const Path& at) {
  switch (at.field->kind) {
    case Kind::kString: {
      uint32_t length = 0;
      if (!in->Length(&length)) {
        return absl::StrCat(Text(&at),
                            " is truncated (its length runs past the end of its "
                            "message)");
      }
      Reader bytes = in->Sub(length);
      if (!wire::IsUtf8(bytes.p, bytes.end)) return absl::StrCat(Text(&at), " is not valid UTF-8");
      return "";
    }
    case Kind::kVarint:
    case Kind::kVarints: {
      if (wire_type == kVarintType) {
        uint64_t value = 0;
        return in->Varint(&value) ? "" : absl::StrCat(Text(&at), " is a malformed varint");
      }
      uint32_t length = 0;
      if (!in->Length(&length)) return absl::StrCat(Text(&at), " (packed) is truncated");
      Reader packed = in->Sub(length);
      while (!packed.done()) {
        uint64_t value = 0;
        if (!packed.Varint(&value)) {
          return absl::StrCat(Text(&at), " (packed) holds a malformed varint");
        }
      }
      return "";
    }
    case Kind::kFloats: {
      if (wire_type == kFixed32Type) {
        return in->Skip(4) ? "" : absl::StrCat(Text(&at), " is truncated (a float takes 4 bytes)");
      }
      uint32_t length = 0;
      if (!in->Length(&length)) return absl::StrCat(Text(&at), " (packed) is truncated");
      if (length % 4 != 0) {
        return absl::StrCat(Text(&at), " (packed floats) is ", length,
                            " bytes, not a multiple of 4");
      }
      in->Sub(length);
      return "";
    }
    case Kind::kFeature:
    case Kind::kCandidate: {
      uint32_t length = 0;
      if (!in->Length(&length)) return absl::StrCat(Text(&at), " is truncated");
      return Walk(in->Sub(length), depth - 1, &at,
                  at.field->kind == Kind::kFeature ? Message::kFeature : Message::kCandidate);
    }
  }
  return "";
}

std::string Walk(Reader in, int depth, const Path* path, Message message) {
  int counts[8] = {};  // per field number (all below 8), for the index of repeated messages
  while (!in.done()) {
    uint32_t tag = 0;
    if (!in.Tag(&tag)) return absl::StrCat(Text(path), ": a field tag is malformed");
    if (wire::EndsMessage(tag)) {
      return absl::StrCat(Text(path), tag == 0 ? ": a field tag of 0" : ": an end-group tag",
                          " where a field was expected");
    }
    const uint32_t number = tag >> 3, wire_type = tag & 7;
    const FieldInfo* field = message == Message::kFeature     ? Find(kFeatureFields, number)
                             : message == Message::kCandidate ? Find(kCandidateFields, number)
                                                              : Find(kRequestFields, number);
    // A known field number with another wire type is an unknown field to protobuf (packed
    // and unpacked repeated scalars are both known; a singular varint has no packed form).
    const bool known =
        field != nullptr && ((wire_type == kDelimitedType && field->kind != Kind::kVarint) ||
                             ((field->kind == Kind::kVarint || field->kind == Kind::kVarints) &&
                              wire_type == kVarintType) ||
                             (field->kind == Kind::kFloats && wire_type == kFixed32Type));
    if (!known) {
      if (!wire::SkipField(&in, tag, depth)) {
        return absl::StrCat(Text(path), ": unknown field ", number, " is malformed or truncated");
      }
      continue;
    }
    const Path at{path, field, Repeated(field->kind) ? counts[field->number]++ : -1};
    std::string fault = Field(&in, wire_type, depth, at);
    if (!fault.empty()) return fault;
  }
  return "";
}

}  // namespace

std::string DescribeRankRequestFault(absl::string_view wire) {
  const auto* begin = reinterpret_cast<const uint8_t*>(wire.data());
  return Walk(Reader{begin, begin + wire.size()}, wire::kRecursionLimit, nullptr,
              Message::kRequest);
}

absl::Status NotARankRequest(absl::string_view wire) {
  std::string fault = DescribeRankRequestFault(wire);
  if (fault.empty()) fault = "protobuf cannot parse it";
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid fuserank.v1.RankRequest: ", fault));
}

}  // namespace fuserank::server
