#include "server/request_scan.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/escape_text.h"
#include "server/wire_reader.h"

namespace fuserank::server {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Field numbers of proto/fuserank/v1/ranker.proto.
constexpr int kRequestUserFeatures = 2;
constexpr int kRequestCandidates = 4;
constexpr int kRequestModel = 6;
constexpr int kCandidateFeatures = 2;
constexpr int kFeatureName = 1;
constexpr int kFeatureIds = 2;

// Names longer than this are no table name; they are not copied for the message.
constexpr uint32_t kMaxNameInMessage = 256;
// A feature list may exceed its side's table count by this much before the scan refuses
// it: a few extra features are left to RequestDecoder, whose message names the unknown or
// repeated table; far more can only be an attempt to make parsing build millions.
constexpr int kFeatureListSlack = 16;

absl::Status NotARequest(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid fuserank.v1.RankRequest: ", what));
}

int Field(uint32_t tag) { return WireFormatLite::GetTagFieldNumber(tag); }
bool Delimited(uint32_t tag) {
  return WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
}
bool Varint(uint32_t tag) {
  return WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT;
}

// Counts the varints of a packed field of `length` bytes: each ends with a byte < 0x80.
bool CountPackedVarints(CodedInputStream* in, uint32_t length, int64_t* count) {
  while (length > 0) {
    const void* data = nullptr;
    int size = 0;
    if (!in->GetDirectBufferPointer(&data, &size) || size <= 0) return false;
    const int n = static_cast<int>(std::min<uint32_t>(static_cast<uint32_t>(size), length));
    const auto* bytes = static_cast<const uint8_t*>(data);
    *count += wire::CountVarintEnds(bytes, bytes + n);
    if (!in->Skip(n)) return false;
    length -= static_cast<uint32_t>(n);
  }
  return true;
}

// What the scan keeps of one Feature: its ids counted, its name only for a message (in a
// fixed buffer: no allocation per feature).
struct FeatureScan {
  int64_t ids = 0;
  char name[kMaxNameInMessage];
  uint32_t name_size = 0;
  bool long_name = false;

  void Reset() {
    ids = 0;
    name_size = 0;
    long_name = false;
  }
  std::string Name() const {
    return long_name ? std::string("(a name too long to be a table)")
                     : engine::EscapeText(absl::string_view(name, name_size));
  }
};

// Where a feature sits, turned into text only for a message.
struct FeaturePath {
  int candidate = -1;  // -1: user_features
  int k = 0;

  std::string Text() const {
    return candidate < 0 ? absl::StrCat("user_features[", k, "]")
                         : absl::StrCat("candidates[", candidate, "].features[", k, "]");
  }
};

// Reads one Feature message up to the current limit.
bool ScanFeature(CodedInputStream* in, FeatureScan* feature) {
  for (;;) {
    const uint32_t tag = in->ReadTag();
    if (tag == 0) return in->ConsumedEntireMessage();
    if (Field(tag) == kFeatureIds && Delimited(tag)) {
      uint32_t length = 0;
      if (!in->ReadVarint32(&length) || !CountPackedVarints(in, length, &feature->ids)) {
        return false;
      }
    } else if (Field(tag) == kFeatureIds && Varint(tag)) {
      uint64_t id = 0;
      if (!in->ReadVarint64(&id)) return false;
      ++feature->ids;
    } else if (Field(tag) == kFeatureName && Delimited(tag)) {
      uint32_t length = 0;
      if (!in->ReadVarint32(&length)) return false;
      feature->long_name = length > kMaxNameInMessage;
      feature->name_size = feature->long_name ? 0 : length;
      if (!(feature->long_name ? in->Skip(static_cast<int>(std::min<uint32_t>(length, INT_MAX)))
                               : in->ReadRaw(feature->name, static_cast<int>(length)))) {
        return false;
      }
    } else if (!WireFormatLite::SkipField(in, tag)) {
      return false;
    }
  }
}

// Scans the length-delimited Feature that `in` is at and checks its id count.
absl::Status ScanNestedFeature(CodedInputStream* in, const ScanLimits& limits,
                               const FeaturePath& path, FeatureScan* feature) {
  uint32_t length = 0;
  if (!in->ReadVarint32(&length)) return NotARequest("a feature is truncated");
  const CodedInputStream::Limit limit =
      in->PushLimit(static_cast<int>(std::min<uint32_t>(length, INT_MAX)));
  feature->Reset();
  const bool ok = ScanFeature(in, feature);
  in->PopLimit(limit);
  if (!ok) return NotARequest(absl::StrCat(path.Text(), " is malformed"));
  if (feature->ids > limits.max_ids_per_feature) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.Text(), ": ", feature->ids, " ids for table '", feature->Name(),
                     "' exceed server.max_ids_per_feature (", limits.max_ids_per_feature, ")"));
  }
  return absl::OkStatus();
}

absl::Status TooManyFeatures(absl::string_view list, const ScanLimits& limits, int tables,
                             absl::string_view side) {
  return absl::InvalidArgumentError(absl::StrCat(
      list, ": more than ", tables + kFeatureListSlack, " features, but model '", limits.model_name,
      "' has ", tables, " ", side, "-side tables; send each table at most once"));
}

absl::Status TooManyIds(int64_t ids, const ScanLimits& limits) {
  return absl::InvalidArgumentError(absl::StrCat("candidates: the request holds at least ", ids,
                                                 " ids, more than engine.max_batch_ids (",
                                                 limits.max_ids, ")"));
}

// Scans one Candidate message up to the current limit.
absl::Status ScanCandidate(CodedInputStream* in, const ScanLimits& limits, int c, int64_t* ids) {
  int features = 0;
  FeatureScan feature;
  for (;;) {
    const uint32_t tag = in->ReadTag();
    if (tag == 0) {
      if (in->ConsumedEntireMessage()) return absl::OkStatus();
      return NotARequest(absl::StrCat("candidates[", c, "] is malformed"));
    }
    if (Field(tag) == kCandidateFeatures && Delimited(tag)) {
      const int k = features++;
      if (features > limits.item_tables + kFeatureListSlack) {
        return TooManyFeatures(absl::StrCat("candidates[", c, "].features"), limits,
                               limits.item_tables, "item");
      }
      const FeaturePath path{c, k};
      if (absl::Status s = ScanNestedFeature(in, limits, path, &feature); !s.ok()) return s;
      *ids += feature.ids;
      if (*ids > limits.max_ids) return TooManyIds(*ids, limits);
    } else if (!WireFormatLite::SkipField(in, tag)) {
      return NotARequest(absl::StrCat("candidates[", c, "] is malformed"));
    }
  }
}

}  // namespace

absl::Status ScanTopLevel(google::protobuf::io::ZeroCopyInputStream* input, int max_candidates,
                          RequestShape* shape) {
  CodedInputStream in(input);
  int64_t candidates = 0;
  shape->model.clear();
  for (;;) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    if (Field(tag) == kRequestCandidates && Delimited(tag)) {
      ++candidates;
      uint32_t length = 0;
      if (!in.ReadVarint32(&length) ||
          !in.Skip(static_cast<int>(std::min<uint32_t>(length, INT_MAX)))) {
        return NotARequest(absl::StrCat("candidates[", candidates - 1, "] is truncated"));
      }
    } else if (Field(tag) == kRequestModel && Delimited(tag)) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length) ||
          !in.ReadString(&shape->model, static_cast<int>(std::min<uint32_t>(length, INT_MAX)))) {
        return NotARequest("model is truncated");
      }
      // Looked up before any parse checks it: a name protobuf would refuse (every copy
      // of a repeated field must be UTF-8) is refused here, not reported as not loaded.
      const auto* model = reinterpret_cast<const uint8_t*>(shape->model.data());
      if (!wire::IsUtf8(model, model + shape->model.size())) {
        return NotARequest("model is not valid UTF-8");
      }
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return NotARequest("a field is malformed");
    }
  }
  if (!in.ConsumedEntireMessage()) return NotARequest("a field tag is malformed");
  if (candidates > max_candidates) {
    return absl::InvalidArgumentError(absl::StrCat("candidates: ", candidates,
                                                   " candidates exceed server.max_candidates (",
                                                   max_candidates, ")"));
  }
  shape->candidates = static_cast<int>(candidates);
  return absl::OkStatus();
}

absl::Status ScanFeatures(google::protobuf::io::ZeroCopyInputStream* input,
                          const ScanLimits& limits, RequestShape* shape) {
  CodedInputStream in(input);
  int user_features = 0;
  int candidate = 0;
  int64_t ids = 0;
  FeatureScan feature;
  for (;;) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    if (Field(tag) == kRequestUserFeatures && Delimited(tag)) {
      const int k = user_features++;
      if (user_features > limits.user_tables + kFeatureListSlack) {
        return TooManyFeatures("user_features", limits, limits.user_tables, "user");
      }
      const FeaturePath path{-1, k};
      if (absl::Status s = ScanNestedFeature(&in, limits, path, &feature); !s.ok()) return s;
      ids += feature.ids;
      if (ids > limits.max_ids) return TooManyIds(ids, limits);
    } else if (Field(tag) == kRequestCandidates && Delimited(tag)) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length)) return NotARequest("a candidate is truncated");
      const CodedInputStream::Limit limit =
          in.PushLimit(static_cast<int>(std::min<uint32_t>(length, INT_MAX)));
      const absl::Status scanned = ScanCandidate(&in, limits, candidate++, &ids);
      in.PopLimit(limit);
      if (!scanned.ok()) return scanned;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return NotARequest("a field is malformed");
    }
  }
  if (!in.ConsumedEntireMessage()) return NotARequest("a field tag is malformed");
  shape->ids = ids;
  return absl::OkStatus();
}

ParseBounds ParseBoundsOf(const ScanLimits& limits) {
  ParseBounds bounds;
  bounds.user_features = limits.user_tables + kFeatureListSlack;
  bounds.item_features = limits.item_tables + kFeatureListSlack;
  bounds.ids_per_feature = limits.max_ids_per_feature;
  bounds.ids = limits.max_ids;
  return bounds;
}

}  // namespace fuserank::server
