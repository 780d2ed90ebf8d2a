#include "server/request_decoder.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_macros.h"
#include "server/batch_mark.h"
#include "server/logging.h"

namespace fuserank::server {
namespace {

using engine::Side;

// "user_features" or "candidates[3].features", built only when a message needs it.
std::string FeatureList(int candidate) {
  return candidate < 0 ? "user_features" : absl::StrCat("candidates[", candidate, "].features");
}

std::string FeaturePath(int candidate, int k) {
  return absl::StrCat(FeatureList(candidate), "[", k, "]");
}

absl::Status AppendDense(absl::Span<const float> values, int expected, absl::string_view side,
                         int candidate, const std::string& model, std::vector<float>* out) {
  auto path = [&] {
    return candidate < 0 ? std::string("user_dense")
                         : absl::StrCat("candidates[", candidate, "].dense");
  };
  if (values.size() != static_cast<size_t>(expected)) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": model '", model, "' takes ", expected,
                                                   " ", side, " dense values, got ",
                                                   values.size()));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(path(), "[", i, "]: must be a finite number, got ", values[i]));
    }
  }
  out->insert(out->end(), values.begin(), values.end());
  return absl::OkStatus();
}

}  // namespace

RequestDecoder::RequestDecoder(std::shared_ptr<const engine::Model> model, DecodeLimits limits,
                               std::string served_name)
    : model_(std::move(model)), limits_(limits) {
  const auto& user = model_->user_tables();
  const auto& item = model_->item_tables();
  scan_limits_.max_candidates = limits_.max_candidates;
  scan_limits_.max_ids_per_feature = limits_.max_ids_per_feature;
  scan_limits_.max_ids = limits_.max_ids;
  scan_limits_.user_tables = static_cast<int>(user.size());
  scan_limits_.item_tables = static_cast<int>(item.size());
  scan_limits_.model_name = served_name.empty() ? model_->spec().name : std::move(served_name);
  parse_bounds_ = ParseBoundsOf(scan_limits_);
  keyed_ = model_->spec().has_remote_tables();
  // AppendCanonical knows a table by its name's bytes, which must also pass the parse's
  // UTF-8 check for it to accept no more than the parse does.
  canonical_ = !keyed_;
  const auto add = [&](const std::vector<int>& side_tables, Side side,
                       std::vector<CanonicalTable>* canonical) {
    for (size_t s = 0; s < side_tables.size(); ++s) {
      const engine::EmbeddingTable& table = model_->tables()[side_tables[s]];
      tables_[table.name] = {side_tables[s], static_cast<int>(s), side};
      canonical->push_back({table.name, table.rows, table.oov});
      const auto* name = reinterpret_cast<const uint8_t*>(table.name.data());
      canonical_ = canonical_ && wire::IsUtf8(name, name + table.name.size());
    }
  };
  add(user, Side::kUser, &canonical_user_);
  add(item, Side::kItem, &canonical_item_);
}

absl::Status RequestDecoder::AppendParsed(const RankRequestView& request, engine::Batch* batch,
                                          std::vector<int64_t>* item_ids) const {
  const bool was_empty = batch->model == nullptr;
  if (was_empty) {
    batch->model = model_;
  } else if (batch->model != model_) {
    return absl::InternalError("a request was decoded into a batch of another model");
  }
  const BatchMark mark(*batch);
  const absl::Status status = AppendImpl(request, batch);
  if (!status.ok()) {
    mark.Restore(batch);
    if (was_empty) batch->model.reset();
    return status;
  }
  if (item_ids != nullptr) {
    item_ids->reserve(item_ids->size() + request.candidates.size());
    for (const CandidateView& candidate : request.candidates) {
      item_ids->push_back(candidate.item_id);
    }
  }
  return status;
}

absl::Status RequestDecoder::AppendWire(absl::string_view wire, engine::Batch* batch,
                                        std::vector<int64_t>* item_ids) const {
  std::vector<int64_t> unused;
  CanonicalRequest read;
  if (AppendCanonical(wire, batch, item_ids != nullptr ? item_ids : &unused, &read)) {
    return absl::OkStatus();
  }
  const ThreadRankRequestView request;
  if (!ParseRankRequest(wire, ParseBounds(), &*request)) return NotARankRequest(wire);
  return AppendParsed(*request, batch, item_ids);
}

absl::Status RequestDecoder::Append(const v1::RankRequest& request, engine::Batch* batch) const {
  thread_local std::string wire;
  if (!request.SerializeToString(&wire)) {
    return absl::InvalidArgumentError("the request cannot be serialized");
  }
  return AppendWire(wire, batch);
}

absl::Status RequestDecoder::AppendImpl(const RankRequestView& request,
                                        engine::Batch* batch) const {
  const engine::ModelSpec& spec = model_->spec();
  const int n = static_cast<int>(request.candidates.size());
  if (n > limits_.max_candidates) {
    return absl::InvalidArgumentError(absl::StrCat("candidates: ", n,
                                                   " candidates exceed server.max_candidates (",
                                                   limits_.max_candidates, ")"));
  }
  const size_t ids_before = batch->user.rows.size() + batch->item.rows.size();
  RETURN_IF_ERROR(AppendDense(request.user_dense, spec.dense_user, "user", -1, model_name(),
                              &batch->user_dense));
  RETURN_IF_ERROR(AppendBags(request, request.user_features, Side::kUser, -1, &batch->user));
  for (int c = 0; c < n; ++c) {
    const CandidateView& candidate = request.candidates[c];
    RETURN_IF_ERROR(AppendDense(request.dense(candidate), spec.dense_item, "item", c, model_name(),
                                &batch->item_dense));
    RETURN_IF_ERROR(AppendBags(request, request.features(candidate), Side::kItem, c, &batch->item));
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
  const uint32_t top_k = request.top_k;
  batch->top_k.push_back(top_k == 0 || top_k >= static_cast<uint32_t>(n) ? n : top_k);
  return absl::OkStatus();
}

absl::Status RequestDecoder::AppendBags(const RankRequestView& request, Features features,
                                        Side side, int candidate, engine::BagSet* bags) const {
  const std::vector<int>& order =
      side == Side::kUser ? model_->user_tables() : model_->item_tables();
  // Which feature (by position in the request) fills each of this side's tables.
  absl::InlinedVector<int, 32> slot_feature(order.size(), -1);
  for (int k = 0; k < static_cast<int>(features.size()); ++k) {
    RETURN_IF_ERROR(CheckFeature(features, k, side, candidate, slot_feature.data()));
  }
  for (size_t slot = 0; slot < order.size(); ++slot) {
    const int k = slot_feature[slot];
    if (k >= 0) {
      RETURN_IF_ERROR(
          AppendBag(request, features[k], model_->tables()[order[slot]], k, candidate, bags));
    }
    bags->bag_begin.push_back(static_cast<uint32_t>(bags->rows.size()));
  }
  return absl::OkStatus();
}

absl::Status RequestDecoder::CheckFeature(Features features, int k, Side side, int candidate,
                                          int* slot_feature) const {
  const FeatureView& feature = features[k];
  // Clients send the tables in the model's order, so the k-th table of the side is tried
  // first (names are unique in a model: the same table the lookup would find).
  const std::vector<int>& order =
      side == Side::kUser ? model_->user_tables() : model_->item_tables();
  TableRef in_order;
  const TableRef* found = nullptr;
  if (static_cast<size_t>(k) < order.size() && model_->tables()[order[k]].name == feature.name) {
    in_order = {order[k], k, side};
    found = &in_order;
  } else if (auto it = tables_.find(feature.name); it != tables_.end()) {
    found = &it->second;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(FeaturePath(candidate, k), ": model '", model_name(), "' has no table named '",
                     LogSafe(feature.name), "' (", side == Side::kUser ? "user" : "item",
                     "-side tables: ", TableNames(side), ")"));
  }
  const TableRef& ref = *found;
  if (ref.side != side) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeaturePath(candidate, k), ": table '", feature.name, "' is ",
        ref.side == Side::kUser ? "a user-side table; send it in user_features"
                                : "an item-side table; send it in each candidate's features"));
  }
  if (slot_feature[ref.slot] >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeaturePath(candidate, k), ": table '", feature.name, "' is given twice (also at ",
        FeaturePath(candidate, slot_feature[ref.slot]), "); send each table once"));
  }
  slot_feature[ref.slot] = k;
  if (feature.ids_size() > limits_.max_ids_per_feature) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeaturePath(candidate, k), ": ", feature.ids_size(), " ids for table '", feature.name,
        "' exceed server.max_ids_per_feature (", limits_.max_ids_per_feature, ")"));
  }
  if (feature.weights_size() != 0 && feature.weights_size() != feature.ids_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeaturePath(candidate, k), ": ", feature.weights_size(), " weights for ",
        feature.ids_size(), " ids of table '", feature.name, "'; send one weight per id, or none"));
  }
  return absl::OkStatus();
}

absl::Status RequestDecoder::AppendBag(const RankRequestView& request, const FeatureView& feature,
                                       const engine::EmbeddingTable& table, int k, int candidate,
                                       engine::BagSet* bags) const {
  const int count = feature.ids_size();
  const absl::Span<const int64_t> ids = request.feature_ids(feature);
  const absl::Span<const float> weights = request.feature_weights(feature);
  const bool weighted = !weights.empty();
  // Offsets are 32-bit; a request alone is far below (engine.max_batch_ids), but one
  // appended to a large batch must be refused, never wrap.
  if (bags->rows.size() + static_cast<size_t>(count) > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(FeaturePath(candidate, k), ": the batch is past 32-bit offsets"));
  }
  for (int i = 0; i < count; ++i) {
    const int64_t id = ids[i];
    int32_t row = 0;
    if (keyed_) bags->keys.push_back(id);
    if (table.remote) {  // addressed by the raw id: the backend stages its row
    } else if (!engine::MapRow(id, table.rows, table.oov, &row)) {
      return absl::InvalidArgumentError(absl::StrCat(
          FeaturePath(candidate, k), ".ids[", i, "]: id ", id, " is out of range for table '",
          table.name, "' (", table.rows, " rows: ids 0..", table.rows - 1, "; oov: reject)"));
    }
    const float weight = weighted ? weights[i] : 1.0f;
    if (!std::isfinite(weight)) {
      return absl::InvalidArgumentError(absl::StrCat(FeaturePath(candidate, k), ".weights[", i,
                                                     "]: must be a finite number, got ", weight));
    }
    bags->rows.push_back(row);
    bags->weights.push_back(weight);
  }
  return absl::OkStatus();
}

std::string RequestDecoder::TableNames(Side side) const {
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

}  // namespace fuserank::server
