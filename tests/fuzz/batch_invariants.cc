#include "tests/fuzz/batch_invariants.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/fuzz/fuzz_check.h"

namespace fuserank::fuzz {
namespace {

void CheckOffsets(const std::vector<uint32_t>& begin, size_t entries, size_t total,
                  const char* what) {
  FUZZ_CHECK(begin.size() == entries + 1,
             absl::StrCat(what, ": ", begin.size(), " offsets for ", entries, " entries"));
  FUZZ_CHECK(begin.front() == 0, absl::StrCat(what, ": first offset ", begin.front()));
  for (size_t i = 1; i < begin.size(); ++i) {
    FUZZ_CHECK(begin[i - 1] <= begin[i], absl::StrCat(what, ": offset ", i, " decreases"));
  }
  FUZZ_CHECK(begin.back() == total,
             absl::StrCat(what, ": last offset ", begin.back(), ", array size ", total));
}

void CheckFinite(const std::vector<float>& values, const char* what) {
  for (size_t i = 0; i < values.size(); ++i) {
    FUZZ_CHECK(std::isfinite(values[i]), absl::StrCat(what, "[", i, "] is not finite"));
  }
}

// Bags of `bags` cycle through `tables` (user or item side, model order).
void CheckBags(const engine::BagSet& bags, const engine::Model& model,
               const std::vector<int>& tables, size_t owners, int max_ids, const char* what) {
  CheckOffsets(bags.bag_begin, owners * tables.size(), bags.rows.size(), what);
  FUZZ_CHECK(
      bags.weights.size() == bags.rows.size(),
      absl::StrCat(what, ": ", bags.weights.size(), " weights, ", bags.rows.size(), " rows"));
  CheckFinite(bags.weights, what);
  for (size_t b = 0; b < bags.num_bags(); ++b) {
    const engine::EmbeddingTable& table = model.tables()[tables[b % tables.size()]];
    const uint32_t begin = bags.bag_begin[b], end = bags.bag_begin[b + 1];
    FUZZ_CHECK(end - begin <= static_cast<uint32_t>(max_ids),
               absl::StrCat(what, ": bag ", b, " holds ", end - begin, " ids"));
    for (uint32_t i = begin; i < end; ++i) {
      FUZZ_CHECK(bags.rows[i] >= 0 && bags.rows[i] < table.rows,
                 absl::StrCat(what, ": row ", bags.rows[i], " outside table '", table.name, "' (",
                              table.rows, " rows)"));
    }
  }
}

void CheckBag(const engine::BagSet& bags, size_t b, const ReferenceBag& expected,
              const char* what) {
  FUZZ_CHECK(b + 1 < bags.bag_begin.size(), absl::StrCat(what, ": bag ", b, " missing"));
  const uint32_t begin = bags.bag_begin[b], end = bags.bag_begin[b + 1];
  FUZZ_CHECK(end - begin == expected.rows.size(),
             absl::StrCat(what, ": bag ", b, " holds ", end - begin, " ids, expected ",
                          expected.rows.size()));
  for (uint32_t i = 0; i < end - begin; ++i) {
    FUZZ_CHECK(bags.rows[begin + i] == expected.rows[i],
               absl::StrCat(what, ": bag ", b, " id ", i, " -> row ", bags.rows[begin + i],
                            ", expected ", expected.rows[i]));
    FUZZ_CHECK(bags.weights[begin + i] == expected.weights[i],
               absl::StrCat(what, ": bag ", b, " weight ", i));
  }
}

}  // namespace

bool SameBatch(const engine::Batch& a, const engine::Batch& b) {
  return a.model == b.model && a.candidate_begin == b.candidate_begin && a.top_k == b.top_k &&
         a.user.bag_begin == b.user.bag_begin && a.user.rows == b.user.rows &&
         a.user.weights == b.user.weights && a.item.bag_begin == b.item.bag_begin &&
         a.item.rows == b.item.rows && a.item.weights == b.item.weights &&
         a.user_dense == b.user_dense && a.item_dense == b.item_dense;
}

void CheckBatchInvariants(const engine::Batch& batch, const server::DecodeLimits& limits) {
  FUZZ_CHECK(batch.model != nullptr, "a non-empty batch has no model");
  const engine::Model& model = *batch.model;
  const engine::ModelSpec& spec = model.spec();
  const size_t requests = batch.top_k.size();
  const size_t candidates = batch.candidate_begin.back();
  CheckOffsets(batch.candidate_begin, requests, candidates, "candidate_begin");
  for (size_t r = 0; r < requests; ++r) {
    const uint32_t count = batch.candidate_begin[r + 1] - batch.candidate_begin[r];
    FUZZ_CHECK(count <= static_cast<uint32_t>(limits.max_candidates),
               absl::StrCat("request ", r, " has ", count, " candidates"));
    FUZZ_CHECK(
        batch.top_k[r] <= count && (batch.top_k[r] >= 1 || count == 0),
        absl::StrCat("request ", r, ": top_k ", batch.top_k[r], " for ", count, " candidates"));
  }
  CheckBags(batch.user, model, model.user_tables(), requests, limits.max_ids_per_feature, "user");
  CheckBags(batch.item, model, model.item_tables(), candidates, limits.max_ids_per_feature, "item");
  FUZZ_CHECK(batch.user_dense.size() == requests * spec.dense_user,
             absl::StrCat(batch.user_dense.size(), " user dense values"));
  FUZZ_CHECK(batch.item_dense.size() == candidates * spec.dense_item,
             absl::StrCat(batch.item_dense.size(), " item dense values"));
  CheckFinite(batch.user_dense, "user_dense");
  CheckFinite(batch.item_dense, "item_dense");
}

void CheckLastRequest(const engine::Batch& batch, const ReferenceResult& expected) {
  const engine::Model& model = *batch.model;
  const size_t r = batch.top_k.size() - 1;
  const size_t first = batch.candidate_begin[r];
  const size_t count = batch.candidate_begin[r + 1] - first;
  FUZZ_CHECK(count == static_cast<size_t>(expected.num_candidates),
             absl::StrCat(count, " candidates, expected ", expected.num_candidates));
  FUZZ_CHECK(batch.top_k[r] == expected.top_k,
             absl::StrCat("top_k ", batch.top_k[r], ", expected ", expected.top_k));
  const size_t num_user = model.user_tables().size(), num_item = model.item_tables().size();
  for (size_t u = 0; u < num_user; ++u) {
    CheckBag(batch.user, r * num_user + u, expected.user_bags[u], "user");
  }
  for (size_t b = 0; b < count * num_item; ++b) {
    CheckBag(batch.item, first * num_item + b, expected.item_bags[b], "item");
  }
  const std::vector<float> user_dense(batch.user_dense.end() - expected.user_dense.size(),
                                      batch.user_dense.end());
  FUZZ_CHECK(user_dense == expected.user_dense, "user_dense differs from the request");
  const std::vector<float> item_dense(batch.item_dense.end() - expected.item_dense.size(),
                                      batch.item_dense.end());
  FUZZ_CHECK(item_dense == expected.item_dense, "item dense values differ from the request");
}

}  // namespace fuserank::fuzz
