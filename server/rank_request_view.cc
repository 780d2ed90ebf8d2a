#include "server/rank_request_view.h"

#include <algorithm>
#include <cstring>

#include "server/rank_request_tags.h"
#include "server/wire_reader.h"

namespace fuserank::server {
namespace {

using wire::EndsMessage;
using wire::kRecursionLimit;
using wire::Reader;
using wire::SkipField;
using wire::String;

using tags::kCandidateFeatures;
using tags::kCandidates;
using tags::kDense;
using tags::kDensePacked;
using tags::kIds;
using tags::kIdsPacked;
using tags::kItemId;
using tags::kModel;
using tags::kName;
using tags::kRequestId;
using tags::kTopK;
using tags::kUserDense;
using tags::kUserDensePacked;
using tags::kUserFeatures;
using tags::kWeights;
using tags::kWeightsPacked;

// The most a thread's view keeps between requests.
constexpr size_t kKeptViewBytes = 1 << 20;

// Appends the packed varints `in` is at to `out`; false past `max_size` values in `out`.
bool PackedVarints(Reader* in, size_t max_size, std::vector<int64_t>* out) {
  uint32_t length = 0;
  if (!in->Length(&length)) return false;
  Reader packed = in->Sub(length);
  while (!packed.done()) {
    uint64_t value = 0;
    if (!packed.Varint(&value) || out->size() >= max_size) return false;
    out->push_back(static_cast<int64_t>(value));
  }
  return true;
}

bool PackedFloats(Reader* in, std::vector<float>* out) {
  uint32_t length = 0;
  if (!in->Length(&length) || length % sizeof(float) != 0) return false;
  const size_t old = out->size();
  out->resize(old + length / sizeof(float));
  if (length > 0) std::memcpy(out->data() + old, in->p, length);  // data() may be null
  in->p += length;
  return true;
}

bool Float(Reader* in, std::vector<float>* out) {
  if (static_cast<size_t>(in->end - in->p) < sizeof(float)) return false;
  float value;
  std::memcpy(&value, in->p, sizeof(float));
  in->p += sizeof(float);
  out->push_back(value);
  return true;
}

// What one parse reads into and stops at.
struct Target {
  const ParseBounds& bounds;
  RankRequestView* view;
};

bool ParseFeature(Reader in, int depth, const Target& target, FeatureView* feature) {
  RankRequestView* view = target.view;
  feature->ids_begin = static_cast<uint32_t>(view->ids.size());
  feature->weights_begin = static_cast<uint32_t>(view->weights.size());
  // The most ids the view may hold once this feature is read.
  const size_t max_ids = static_cast<size_t>(std::min<int64_t>(
      target.bounds.ids, static_cast<int64_t>(feature->ids_begin) + target.bounds.ids_per_feature));
  // The shape clients send, read without the dispatch below: the name, then the packed ids
  // (both tags are one byte). Whatever follows, or any other order, takes the loop.
  if (!in.done() && *in.p == kName) {
    ++in.p;
    if (!String(&in, &feature->name)) return false;
    if (!in.done() && *in.p == kIdsPacked) {
      ++in.p;
      if (!PackedVarints(&in, max_ids, &view->ids)) return false;
    }
  }
  while (!in.done()) {
    uint32_t tag = 0;
    if (!in.Tag(&tag)) return false;
    bool ok = true;
    switch (tag) {
      case kName:
        ok = String(&in, &feature->name);
        break;
      case kIdsPacked:
        ok = PackedVarints(&in, max_ids, &view->ids);
        break;
      case kIds: {
        uint64_t id = 0;
        ok = in.Varint(&id) && view->ids.size() < max_ids;
        view->ids.push_back(static_cast<int64_t>(id));
        break;
      }
      case kWeightsPacked:
        ok = PackedFloats(&in, &view->weights);
        break;
      case kWeights:
        ok = Float(&in, &view->weights);
        break;
      default:
        ok = !EndsMessage(tag) && SkipField(&in, tag, depth);
    }
    if (!ok) return false;
  }
  feature->ids_end = static_cast<uint32_t>(view->ids.size());
  feature->weights_end = static_cast<uint32_t>(view->weights.size());
  return true;
}

// Reads the length-delimited Feature `in` is at into a new entry of `features`, unless
// that would make the list longer than `max_size`.
bool NestedFeature(Reader* in, int depth, const Target& target, size_t max_size,
                   std::vector<FeatureView>* features) {
  uint32_t length = 0;
  if (!in->Length(&length) || features->size() >= max_size) return false;
  // Parsed in place: nothing below adds to `features`.
  return ParseFeature(in->Sub(length), depth - 1, target, &features->emplace_back());
}

bool ParseCandidate(Reader in, int depth, const Target& target, CandidateView* candidate) {
  RankRequestView* view = target.view;
  candidate->features_begin = static_cast<uint32_t>(view->item_features.size());
  candidate->dense_begin = static_cast<uint32_t>(view->item_dense.size());
  while (!in.done()) {
    uint32_t tag = 0;
    if (!in.Tag(&tag)) return false;
    bool ok = true;
    switch (tag) {
      case kItemId: {
        uint64_t id = 0;
        ok = in.Varint(&id);
        candidate->item_id = static_cast<int64_t>(id);
        break;
      }
      case kCandidateFeatures:
        ok = NestedFeature(&in, depth, target,
                           candidate->features_begin +
                               static_cast<size_t>(std::max(0, target.bounds.item_features)),
                           &view->item_features);
        break;
      case kDensePacked:
        ok = PackedFloats(&in, &view->item_dense);
        break;
      case kDense:
        ok = Float(&in, &view->item_dense);
        break;
      default:
        ok = !EndsMessage(tag) && SkipField(&in, tag, depth);
    }
    if (!ok) return false;
  }
  candidate->features_end = static_cast<uint32_t>(view->item_features.size());
  candidate->dense_end = static_cast<uint32_t>(view->item_dense.size());
  return true;
}

bool NestedCandidate(Reader* in, int depth, const Target& target) {
  uint32_t length = 0;
  if (!in->Length(&length)) return false;
  CandidateView candidate;
  if (!ParseCandidate(in->Sub(length), depth - 1, target, &candidate)) return false;
  target.view->candidates.push_back(candidate);
  return true;
}

}  // namespace

void RankRequestView::Clear() {
  request_id = {};
  model = {};
  top_k = 0;
  user_dense.clear();
  user_features.clear();
  candidates.clear();
  item_features.clear();
  item_dense.clear();
  ids.clear();
  weights.clear();
}

size_t RankRequestView::CapacityBytes() const {
  return (user_dense.capacity() + item_dense.capacity() + weights.capacity()) * sizeof(float) +
         (user_features.capacity() + item_features.capacity()) * sizeof(FeatureView) +
         candidates.capacity() * sizeof(CandidateView) + ids.capacity() * sizeof(int64_t);
}

namespace {

RankRequestView& ThreadView() {
  thread_local RankRequestView view;
  return view;
}

}  // namespace

ThreadRankRequestView::ThreadRankRequestView() : view_(&ThreadView()) {}

ThreadRankRequestView::~ThreadRankRequestView() {
  if (view_->CapacityBytes() > kKeptViewBytes) *view_ = RankRequestView();
}

bool ParseRankRequest(absl::string_view wire, const ParseBounds& bounds, RankRequestView* view) {
  view->Clear();
  const Target target{bounds, view};
  const auto* begin = reinterpret_cast<const uint8_t*>(wire.data());
  Reader in{begin, begin + wire.size()};
  const int depth = kRecursionLimit;
  while (!in.done()) {
    uint32_t tag = 0;
    if (!in.Tag(&tag)) return false;
    bool ok = true;
    switch (tag) {
      case kRequestId:
        ok = String(&in, &view->request_id);
        break;
      case kUserFeatures:
        ok = NestedFeature(&in, depth, target,
                           static_cast<size_t>(std::max(0, bounds.user_features)),
                           &view->user_features);
        break;
      case kUserDensePacked:
        ok = PackedFloats(&in, &view->user_dense);
        break;
      case kUserDense:
        ok = Float(&in, &view->user_dense);
        break;
      case kCandidates:
        ok = NestedCandidate(&in, depth, target);
        break;
      case kTopK: {
        uint64_t top_k = 0;
        ok = in.Varint(&top_k);
        view->top_k = static_cast<uint32_t>(top_k);
        break;
      }
      case kModel:
        ok = String(&in, &view->model);
        break;
      default:
        ok = !EndsMessage(tag) && SkipField(&in, tag, depth);
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace fuserank::server
