#include "tests/fuzz/reference_decode.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fuserank::fuzz {
namespace {

using Features = google::protobuf::RepeatedPtrField<v1::Feature>;

bool AllFinite(const google::protobuf::RepeatedField<float>& values) {
  for (float v : values) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

// The row of `id`: in range as is; otherwise wrapped into [0, rows) unless the table rejects.
bool ReferenceRow(int64_t id, const engine::EmbeddingTable& table, int32_t* row) {
  if (id >= 0 && id < table.rows) {
    *row = static_cast<int32_t>(id);
    return true;
  }
  if (table.oov == engine::Oov::kReject) return false;
  int64_t wrapped = id % table.rows;
  if (wrapped < 0) wrapped += table.rows;
  *row = static_cast<int32_t>(wrapped);
  return true;
}

// Appends one bag per table of `side` (model order) to `bags`; false with `reason` set
// when `features` break a rule.
bool DecodeSide(const engine::Model& model, const server::DecodeLimits& limits,
                const Features& features, engine::Side side, std::vector<ReferenceBag>* bags,
                std::string* reason) {
  // Every feature must name a table of this side, at most once, within the limits.
  for (int k = 0; k < features.size(); ++k) {
    const v1::Feature& feature = features[k];
    const int t = model.FindTable(feature.name());
    if (t < 0) {
      *reason = absl::StrCat("no table '", feature.name(), "'");
      return false;
    }
    if (model.tables()[t].side != side) {
      *reason = absl::StrCat("table '", feature.name(), "' sent on the wrong side");
      return false;
    }
    for (int j = 0; j < k; ++j) {
      if (features[j].name() == feature.name()) {
        *reason = absl::StrCat("table '", feature.name(), "' sent twice");
        return false;
      }
    }
    if (feature.ids_size() > limits.max_ids_per_feature) {
      *reason = "too many ids";
      return false;
    }
    if (feature.weights_size() != 0 && feature.weights_size() != feature.ids_size()) {
      *reason = "weights and ids differ in count";
      return false;
    }
  }
  const std::vector<int>& order =
      side == engine::Side::kUser ? model.user_tables() : model.item_tables();
  for (int t : order) {
    const engine::EmbeddingTable& table = model.tables()[t];
    ReferenceBag bag;
    for (const v1::Feature& feature : features) {
      if (feature.name() != table.name) continue;
      for (int i = 0; i < feature.ids_size(); ++i) {
        int32_t row = 0;
        if (!ReferenceRow(feature.ids(i), table, &row)) {
          *reason = absl::StrCat("id ", feature.ids(i), " out of range for '", table.name, "'");
          return false;
        }
        const float weight = feature.weights_size() == 0 ? 1.0f : feature.weights(i);
        if (!std::isfinite(weight)) {
          *reason = "a weight is not finite";
          return false;
        }
        bag.rows.push_back(row);
        bag.weights.push_back(weight);
      }
    }
    bags->push_back(std::move(bag));
  }
  return true;
}

}  // namespace

ReferenceResult ReferenceDecode(const engine::Model& model, const server::DecodeLimits& limits,
                                const v1::RankRequest& request) {
  ReferenceResult result;
  const engine::ModelSpec& spec = model.spec();
  const int n = request.candidates_size();
  if (n > limits.max_candidates) {
    result.reason = "too many candidates";
    return result;
  }
  if (request.user_dense_size() != spec.dense_user || !AllFinite(request.user_dense())) {
    result.reason = "bad user_dense";
    return result;
  }
  result.user_dense.assign(request.user_dense().begin(), request.user_dense().end());
  if (!DecodeSide(model, limits, request.user_features(), engine::Side::kUser, &result.user_bags,
                  &result.reason)) {
    return result;
  }
  for (const v1::Candidate& candidate : request.candidates()) {
    if (candidate.dense_size() != spec.dense_item || !AllFinite(candidate.dense())) {
      result.reason = "bad candidate dense";
      return result;
    }
    result.item_dense.insert(result.item_dense.end(), candidate.dense().begin(),
                             candidate.dense().end());
    if (!DecodeSide(model, limits, candidate.features(), engine::Side::kItem, &result.item_bags,
                    &result.reason)) {
      return result;
    }
  }
  result.num_candidates = n;
  const uint32_t k = request.top_k();
  result.top_k = (k == 0 || k >= static_cast<uint32_t>(n)) ? static_cast<uint32_t>(n) : k;
  result.valid = true;
  return result;
}

}  // namespace fuserank::fuzz
