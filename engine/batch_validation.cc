#include "engine/batch_validation.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model.h"
#include "engine/status_macros.h"

namespace fuserank::engine {
namespace {

// Checks that a BagSet holds `bags` bags whose rows fit their tables: bag b belongs to
// tables[b % tables.size()].
absl::Status CheckBags(const Model& model, const BagSet& set, const std::vector<int>& tables,
                       size_t bags, const char* side) {
  if (set.bag_begin.empty() || set.num_bags() != bags || set.bag_begin.front() != 0 ||
      set.rows.size() != set.bag_begin.back() || set.weights.size() != set.rows.size()) {
    return absl::InvalidArgumentError(absl::StrCat("batch: ", side, " bags malformed (",
                                                   set.bag_begin.empty() ? 0 : set.num_bags(),
                                                   " bags, expected ", bags, ")"));
  }
  const bool keyed = model.spec().has_remote_tables();
  if (keyed ? set.keys.size() != set.rows.size() : !set.keys.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch: ", side, " keys malformed (", set.keys.size(), " for ",
                     set.rows.size(), " rows", keyed ? ")" : "; the model has no redis table)"));
  }
  const size_t num_tables = tables.size();
  if (num_tables == 0) return absl::OkStatus();  // no bags (checked above)
  for (size_t first = 0; first < bags; first += num_tables) {
    for (size_t t = 0; t < num_tables; ++t) {
      const size_t b = first + t;
      if (set.bag_begin[b] > set.bag_begin[b + 1]) {
        return absl::InvalidArgumentError(absl::StrCat("batch: ", side, " bag ", b, " reversed"));
      }
      // The last offset is checked against the rows, not the ones between: an offset past
      // them followed by a smaller one would be read before the reversal shows.
      if (set.bag_begin[b + 1] > set.rows.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("batch: ", side, " bag ", b, " ends past the rows (", set.bag_begin[b + 1],
                         " > ", set.rows.size(), ")"));
      }
      const EmbeddingTable& table = model.tables()[tables[t]];
      if (table.remote) continue;  // any int64 key; rows are staged by the backend
      for (uint32_t i = set.bag_begin[b]; i < set.bag_begin[b + 1]; ++i) {
        if (set.rows[i] < 0 || set.rows[i] >= table.rows) {
          return absl::InvalidArgumentError(absl::StrCat(
              "batch: row ", set.rows[i], " out of range for table '", table.name, "'"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateBatch(const Batch& batch) {
  if (batch.model == nullptr) return absl::InvalidArgumentError("batch: no model");
  const Model& model = *batch.model;
  const int requests = batch.num_requests();
  if (requests < 0 || batch.candidate_begin.front() != 0 ||
      batch.top_k.size() != static_cast<size_t>(requests)) {
    return absl::InvalidArgumentError("batch: candidate_begin or top_k malformed");
  }
  for (int r = 0; r < requests; ++r) {
    if (batch.candidate_begin[r] > batch.candidate_begin[r + 1]) {
      return absl::InvalidArgumentError("batch: candidate_begin decreases");
    }
    // The decoders write 1..count (count for "all"), 0 only for a request of none.
    const uint32_t count = batch.candidate_begin[r + 1] - batch.candidate_begin[r];
    if (batch.top_k[r] > count || (batch.top_k[r] == 0 && count > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("batch: request ", r, " has top_k ",
                                                     batch.top_k[r], " for ", count,
                                                     " candidates (expected 1..", count, ")"));
    }
  }
  const size_t candidates = batch.num_candidates();
  const ModelSpec& spec = model.spec();
  if (batch.user_dense.size() != static_cast<size_t>(requests) * spec.dense_user ||
      batch.item_dense.size() != candidates * spec.dense_item) {
    return absl::InvalidArgumentError("batch: dense features of the wrong size");
  }
  RETURN_IF_ERROR(CheckBags(model, batch.user, model.user_tables(),
                            requests * model.user_tables().size(), "user"));
  return CheckBags(model, batch.item, model.item_tables(), candidates * model.item_tables().size(),
                   "item");
}

}  // namespace fuserank::engine
