#include "bench/decode/baseline_rank_decoder.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_macros.h"
#include "server/logging.h"

namespace fuserank::bench {
namespace {

using engine::Side;

// "user_features" or "candidates[3].features", built only when a message needs it.
std::string FeatureList(int candidate) {
  return candidate < 0 ? "user_features" : absl::StrCat("candidates[", candidate, "].features");
}

std::string FeaturePath(int candidate, int k) {
  return absl::StrCat(FeatureList(candidate), "[", k, "]");
}

absl::Status AppendDense(const google::protobuf::RepeatedField<float>& values, int expected,
                         absl::string_view side, int candidate, const std::string& model,
                         std::vector<float>* out) {
  auto path = [&] {
    return candidate < 0 ? std::string("user_dense")
                         : absl::StrCat("candidates[", candidate, "].dense");
  };
  if (values.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": model '", model, "' takes ", expected,
                                                   " ", side, " dense values, got ",
                                                   values.size()));
  }
  for (int i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(path(), "[", i, "]: must be a finite number, got ", values[i]));
    }
  }
  out->insert(out->end(), values.begin(), values.end());
  return absl::OkStatus();
}

// Sizes of every array of a Batch, to undo a partial Append.
struct BatchMark {
  explicit BatchMark(const engine::Batch& b)
      : requests(b.candidate_begin.size()),
        top_k(b.top_k.size()),
        user_bags(b.user.bag_begin.size()),
        user_rows(b.user.rows.size()),
        item_bags(b.item.bag_begin.size()),
        item_rows(b.item.rows.size()),
        user_dense(b.user_dense.size()),
        item_dense(b.item_dense.size()) {}

  void Restore(engine::Batch* b) const {
    b->candidate_begin.resize(requests);
    b->top_k.resize(top_k);
    b->user.bag_begin.resize(user_bags);
    b->user.rows.resize(user_rows);
    b->user.weights.resize(user_rows);
    b->item.bag_begin.resize(item_bags);
    b->item.rows.resize(item_rows);
    b->item.weights.resize(item_rows);
    b->user_dense.resize(user_dense);
    b->item_dense.resize(item_dense);
  }

  size_t requests, top_k, user_bags, user_rows, item_bags, item_rows, user_dense, item_dense;
};

}  // namespace

BaselineRankDecoder::BaselineRankDecoder(std::shared_ptr<const engine::Model> model,
                                         server::DecodeLimits limits)
    : model_(std::move(model)), limits_(limits) {
  const auto& user = model_->user_tables();
  const auto& item = model_->item_tables();
  for (size_t s = 0; s < user.size(); ++s) {
    tables_[model_->tables()[user[s]].name] = {user[s], static_cast<int>(s), Side::kUser};
  }
  for (size_t s = 0; s < item.size(); ++s) {
    tables_[model_->tables()[item[s]].name] = {item[s], static_cast<int>(s), Side::kItem};
  }
}

absl::Status BaselineRankDecoder::Append(const v1::RankRequest& request,
                                         engine::Batch* batch) const {
  const bool was_empty = batch->model == nullptr;
  if (was_empty) {
    batch->model = model_;
  } else if (batch->model != model_) {
    return absl::InternalError("a request was decoded into a batch of another model");
  }
  const BatchMark mark(*batch);
  absl::Status status = AppendImpl(request, batch);
  if (!status.ok()) {
    mark.Restore(batch);
    if (was_empty) batch->model.reset();
  }
  return status;
}

absl::Status BaselineRankDecoder::AppendImpl(const v1::RankRequest& request,
                                             engine::Batch* batch) const {
  const engine::ModelSpec& spec = model_->spec();
  const int n = request.candidates_size();
  if (n > limits_.max_candidates) {
    return absl::InvalidArgumentError(absl::StrCat("candidates: ", n,
                                                   " candidates exceed server.max_candidates (",
                                                   limits_.max_candidates, ")"));
  }
  const size_t ids_before = batch->user.rows.size() + batch->item.rows.size();
  RETURN_IF_ERROR(AppendDense(request.user_dense(), spec.dense_user, "user", -1, spec.name,
                              &batch->user_dense));
  RETURN_IF_ERROR(AppendBags(request.user_features(), Side::kUser, -1, &batch->user));
  for (int c = 0; c < n; ++c) {
    const v1::Candidate& candidate = request.candidates(c);
    RETURN_IF_ERROR(
        AppendDense(candidate.dense(), spec.dense_item, "item", c, spec.name, &batch->item_dense));
    RETURN_IF_ERROR(AppendBags(candidate.features(), Side::kItem, c, &batch->item));
  }
  const size_t ids = batch->user.rows.size() + batch->item.rows.size() - ids_before;
  if (ids > static_cast<size_t>(limits_.max_ids)) {
    return absl::InvalidArgumentError(absl::StrCat("candidates: the request holds ", ids,
                                                   " ids, more than engine.max_batch_ids (",
                                                   limits_.max_ids, ")"));
  }
  if (batch->candidate_begin.back() > UINT32_MAX - static_cast<uint32_t>(n)) {
    return absl::InvalidArgumentError("candidates: the batch is past 32-bit offsets");
  }
  batch->candidate_begin.push_back(batch->candidate_begin.back() + static_cast<uint32_t>(n));
  const uint32_t top_k = request.top_k();
  batch->top_k.push_back(top_k == 0 || top_k >= static_cast<uint32_t>(n) ? n : top_k);
  return absl::OkStatus();
}

absl::Status BaselineRankDecoder::AppendBags(const Features& features, Side side, int candidate,
                                             engine::BagSet* bags) const {
  const std::vector<int>& order =
      side == Side::kUser ? model_->user_tables() : model_->item_tables();
  // Which feature (by position in the request) fills each of this side's tables.
  absl::InlinedVector<int, 32> slot_feature(order.size(), -1);
  for (int k = 0; k < features.size(); ++k) {
    RETURN_IF_ERROR(CheckFeature(features, k, side, candidate, slot_feature.data()));
  }
  for (size_t slot = 0; slot < order.size(); ++slot) {
    const int k = slot_feature[slot];
    if (k >= 0) {
      RETURN_IF_ERROR(AppendBag(features[k], model_->tables()[order[slot]], k, candidate, bags));
    }
    bags->bag_begin.push_back(static_cast<uint32_t>(bags->rows.size()));
  }
  return absl::OkStatus();
}

absl::Status BaselineRankDecoder::CheckFeature(const Features& features, int k, Side side,
                                               int candidate, int* slot_feature) const {
  const v1::Feature& feature = features[k];
  auto it = tables_.find(feature.name());
  if (it == tables_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeaturePath(candidate, k), ": model '", model_->spec().name, "' has no table named '",
        server::LogSafe(feature.name()), "' (", side == Side::kUser ? "user" : "item",
        "-side tables: ", TableNames(side), ")"));
  }
  const TableRef& ref = it->second;
  if (ref.side != side) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeaturePath(candidate, k), ": table '", feature.name(), "' is ",
        ref.side == Side::kUser ? "a user-side table; send it in user_features"
                                : "an item-side table; send it in each candidate's features"));
  }
  if (slot_feature[ref.slot] >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeaturePath(candidate, k), ": table '", feature.name(), "' is given twice (also at ",
        FeaturePath(candidate, slot_feature[ref.slot]), "); send each table once"));
  }
  slot_feature[ref.slot] = k;
  if (feature.ids_size() > limits_.max_ids_per_feature) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeaturePath(candidate, k), ": ", feature.ids_size(), " ids for table '", feature.name(),
        "' exceed server.max_ids_per_feature (", limits_.max_ids_per_feature, ")"));
  }
  if (feature.weights_size() != 0 && feature.weights_size() != feature.ids_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(FeaturePath(candidate, k), ": ", feature.weights_size(), " weights for ",
                     feature.ids_size(), " ids of table '", feature.name(),
                     "'; send one weight per id, or none"));
  }
  return absl::OkStatus();
}

absl::Status BaselineRankDecoder::AppendBag(const v1::Feature& feature,
                                            const engine::EmbeddingTable& table, int k,
                                            int candidate, engine::BagSet* bags) const {
  const int count = feature.ids_size();
  const bool weighted = feature.weights_size() != 0;
  // Offsets are 32-bit; a request alone is far below (engine.max_batch_ids), but one
  // appended to a large batch must be refused, never wrap.
  if (bags->rows.size() + static_cast<size_t>(count) > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(FeaturePath(candidate, k), ": the batch is past 32-bit offsets"));
  }
  for (int i = 0; i < count; ++i) {
    const int64_t id = feature.ids(i);
    int32_t row = 0;
    if (!engine::MapRow(id, table.rows, table.oov, &row)) {
      return absl::InvalidArgumentError(absl::StrCat(
          FeaturePath(candidate, k), ".ids[", i, "]: id ", id, " is out of range for table '",
          table.name, "' (", table.rows, " rows: ids 0..", table.rows - 1, "; oov: reject)"));
    }
    const float weight = weighted ? feature.weights(i) : 1.0f;
    if (!std::isfinite(weight)) {
      return absl::InvalidArgumentError(absl::StrCat(FeaturePath(candidate, k), ".weights[", i,
                                                     "]: must be a finite number, got ", weight));
    }
    bags->rows.push_back(row);
    bags->weights.push_back(weight);
  }
  return absl::OkStatus();
}

std::string BaselineRankDecoder::TableNames(Side side) const {
  const std::vector<int>& order =
      side == Side::kUser ? model_->user_tables() : model_->item_tables();
  std::vector<absl::string_view> names;
  for (int t : order) names.push_back(model_->tables()[t].name);
  if (names.empty()) return "none";
  if (names.size() > 20) {
    names.resize(20);
    return absl::StrCat(absl::StrJoin(names, ", "), ", ...");
  }
  return absl::StrJoin(names, ", ");
}

absl::Status BaselineParseAndAppend(const grpc::ByteBuffer& request,
                                    const BaselineRankDecoder& decoder,
                                    google::protobuf::Arena* arena, engine::Batch* batch,
                                    std::vector<int64_t>* item_ids) {
  auto* parsed = google::protobuf::Arena::CreateMessage<v1::RankRequest>(arena);
  grpc::ByteBuffer wire(request);  // shares the slices; parsing consumes this copy
  const grpc::Status status =
      grpc::GenericDeserialize<grpc::ProtoBufferReader, v1::RankRequest>(&wire, parsed);
  absl::Status decoded;
  if (!status.ok()) {
    decoded = absl::InvalidArgumentError(absl::StrCat(
        "the request is not a valid fuserank.v1.RankRequest: ", status.error_message()));
  } else {
    decoded = decoder.Append(*parsed, batch);
  }
  if (decoded.ok()) {
    item_ids->reserve(static_cast<size_t>(parsed->candidates_size()));
    for (const v1::Candidate& candidate : parsed->candidates()) {
      item_ids->push_back(candidate.item_id());
    }
  }
  arena->Reset();
  return decoded;
}

}  // namespace fuserank::bench
