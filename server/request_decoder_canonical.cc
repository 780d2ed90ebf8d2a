// RequestDecoder::AppendCanonical: the shape clients send, read from the wire bytes
// straight into the batch in one pass (no view, no name hash, no second walk). Anything
// else -- another field order, an unknown field, a limit reached, a bad value -- returns
// false with the batch as it was, and the caller takes the general path
// (rank_request_view.h, then AppendParsed), which reads it and says what is wrong. So
// this file only ever accepts: every check below either passes or gives up.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "server/batch_mark.h"
#include "server/rank_request_tags.h"
#include "server/request_decoder.h"
#include "server/wire_reader.h"

namespace fuserank::server {
namespace {

using wire::Reader;

// The field `in` is at, when its one-byte tag is `tag`: the tag is consumed.
bool Next(Reader* in, uint32_t tag) {
  if (in->done() || *in->p != tag) return false;
  ++in->p;
  return true;
}

// The length-delimited field after its tag, as a message of its own.
bool Nested(Reader* in, Reader* out) {
  uint32_t length = 0;
  if (!in->Length(&length)) return false;
  *out = in->Sub(length);
  return true;
}

// A string field after its tag, which must be valid UTF-8 (as protobuf requires).
bool Utf8String(Reader* in, absl::string_view* out) {
  Reader s{nullptr, nullptr};
  if (!Nested(in, &s) || !wire::IsUtf8(s.p, s.end)) return false;
  *out = absl::string_view(reinterpret_cast<const char*>(s.p), s.end - s.p);
  return true;
}

// A packed float field after its tag, of exactly `count` values, every one finite,
// appended to `out`.
bool FiniteFloats(Reader* in, size_t count, std::vector<float>* out) {
  Reader packed{nullptr, nullptr};
  if (!Nested(in, &packed) || static_cast<size_t>(packed.end - packed.p) != count * sizeof(float)) {
    return false;
  }
  const size_t old = out->size();
  out->resize(old + count);
  if (count > 0) std::memcpy(out->data() + old, packed.p, count * sizeof(float));
  for (size_t i = old; i < old + count; ++i) {
    if (!std::isfinite((*out)[i])) return false;  // the caller restores the batch
  }
  return true;
}

bool SameName(Reader name, absl::string_view table) {
  const size_t n = static_cast<size_t>(name.end - name.p);
  if (n != table.size()) return false;
  for (size_t i = 0; i < n; ++i) {
    if (name.p[i] != static_cast<uint8_t>(table[i])) return false;
  }
  return true;
}

}  // namespace

bool RequestDecoder::AppendCanonical(absl::string_view wire, engine::Batch* batch,
                                     std::vector<int64_t>* item_ids, CanonicalRequest* read) const {
  if (!canonical_ || (batch->model != nullptr && batch->model != model_)) return false;
  const bool was_empty = batch->model == nullptr;
  const BatchMark mark(*batch);
  const size_t items_before = item_ids->size();
  const auto* begin = reinterpret_cast<const uint8_t*>(wire.data());
  if (was_empty) batch->model = model_;
  if (CanonicalAppend(Reader{begin, begin + wire.size()}, batch, item_ids, read)) return true;
  mark.Restore(batch);
  if (was_empty) batch->model.reset();
  item_ids->resize(items_before);
  return false;
}

bool RequestDecoder::CanonicalAppend(Reader in, engine::Batch* batch,
                                     std::vector<int64_t>* item_ids, CanonicalRequest* read) const {
  const engine::ModelSpec& spec = model_->spec();
  *read = CanonicalRequest();
  int64_t ids = 0;
  size_t user_slot = 0;
  bool user_dense = false;
  const uint32_t first_candidate = batch->candidate_begin.back();
  while (!in.done()) {
    Reader field{nullptr, nullptr};
    if (Next(&in, tags::kCandidates)) {
      if (++read->candidates > limits_.max_candidates || !Nested(&in, &field) ||
          !CanonicalCandidate(field, batch, &ids, item_ids)) {
        return false;
      }
    } else if (Next(&in, tags::kUserFeatures)) {
      if (user_slot == canonical_user_.size() || !Nested(&in, &field) ||
          !CanonicalBag(field, canonical_user_[user_slot++], &batch->user, &ids)) {
        return false;
      }
      batch->user.bag_begin.push_back(static_cast<uint32_t>(batch->user.rows.size()));
    } else if (Next(&in, tags::kUserDensePacked)) {
      if (user_dense || !FiniteFloats(&in, spec.dense_user, &batch->user_dense)) return false;
      user_dense = true;
    } else if (Next(&in, tags::kRequestId)) {
      if (!Utf8String(&in, &read->request_id)) return false;  // the last one counts
    } else if (Next(&in, tags::kTopK)) {
      uint64_t top_k = 0;
      if (!in.Varint(&top_k)) return false;
      read->top_k = static_cast<uint32_t>(top_k);  // the last one counts
    } else if (Next(&in, tags::kModel)) {
      absl::string_view model;  // chosen by the scan before the decode
      if (!Utf8String(&in, &model)) return false;
    } else {
      return false;
    }
  }
  if (!user_dense && spec.dense_user != 0) return false;
  for (; user_slot < canonical_user_.size(); ++user_slot) {  // tables not sent: empty bags
    batch->user.bag_begin.push_back(static_cast<uint32_t>(batch->user.rows.size()));
  }
  const auto n = static_cast<uint32_t>(read->candidates);
  if (batch->user.rows.size() > UINT32_MAX || batch->item.rows.size() > UINT32_MAX ||
      first_candidate > UINT32_MAX - n) {
    return false;
  }
  read->ids = ids;
  batch->candidate_begin.push_back(first_candidate + n);
  batch->top_k.push_back(read->top_k == 0 || read->top_k >= n ? n : read->top_k);
  return true;
}

bool RequestDecoder::CanonicalCandidate(Reader in, engine::Batch* batch, int64_t* ids,
                                        std::vector<int64_t>* item_ids) const {
  uint64_t item_id = 0;
  if (Next(&in, tags::kItemId) && !in.Varint(&item_id)) return false;
  engine::BagSet& bags = batch->item;
  size_t slot = 0;
  while (Next(&in, tags::kCandidateFeatures)) {
    Reader feature{nullptr, nullptr};
    if (slot == canonical_item_.size() || !Nested(&in, &feature) ||
        !CanonicalBag(feature, canonical_item_[slot++], &bags, ids)) {
      return false;
    }
    bags.bag_begin.push_back(static_cast<uint32_t>(bags.rows.size()));
  }
  for (; slot < canonical_item_.size(); ++slot) {
    bags.bag_begin.push_back(static_cast<uint32_t>(bags.rows.size()));
  }
  const int dense = model_->spec().dense_item;
  if (Next(&in, tags::kDensePacked)) {
    if (!FiniteFloats(&in, dense, &batch->item_dense)) return false;
  } else if (dense != 0) {
    return false;
  }
  if (!in.done()) return false;
  item_ids->push_back(static_cast<int64_t>(item_id));
  return true;
}

bool RequestDecoder::CanonicalBag(Reader in, const CanonicalTable& table, engine::BagSet* bags,
                                  int64_t* ids) const {
  Reader name{nullptr, nullptr};
  if (!Next(&in, tags::kName) || !Nested(&in, &name) || !SameName(name, table.name)) return false;
  size_t count = 0;
  if (Next(&in, tags::kIdsPacked)) {
    Reader packed{nullptr, nullptr};
    if (!Nested(&in, &packed)) return false;
    while (!packed.done()) {
      uint64_t id = 0;
      int32_t row = 0;
      // Over either bound: the plain decode refuses it, naming the limit, before this
      // path has mapped and appended more ids than a request may hold.
      if (!packed.Varint(&id) || ++count > static_cast<size_t>(limits_.max_ids_per_feature) ||
          *ids + static_cast<int64_t>(count) > limits_.max_ids ||
          !engine::MapRow(static_cast<int64_t>(id), table.rows, table.oov, &row)) {
        return false;
      }
      bags->rows.push_back(row);
    }
  }
  if (Next(&in, tags::kWeightsPacked)) {
    if (!FiniteFloats(&in, count, &bags->weights)) return false;
  } else {
    bags->weights.resize(bags->weights.size() + count, 1.0f);
  }
  *ids += static_cast<int64_t>(count);
  return in.done();
}

}  // namespace fuserank::server
