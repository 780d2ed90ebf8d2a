#include "bench/loadgen/request_pool.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fuserank::bench {

RequestGenerator::RequestGenerator(const engine::ModelSpec& spec, const RequestOptions& options)
    : spec_(spec), options_(options), rng_(options.seed) {
  samplers_.reserve(spec.tables.size());
  scatters_.reserve(spec.tables.size());
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    const engine::TableSpec& table = spec.tables[t];
    samplers_.emplace_back(table.rows, options.zipf_alpha);
    scatters_.emplace_back(table.rows, options.seed * 1000003 + t, options.scatter);
    (table.side == engine::Side::kUser ? user_tables_ : item_tables_)
        .push_back(static_cast<int>(t));
  }
}

void RequestGenerator::FillFeature(int table, fuserank::v1::Feature* feature) {
  feature->set_name(spec_.tables[table].name);
  std::uniform_real_distribution<float> weight(0.5f, 1.5f);
  for (int i = 0; i < options_.bag; ++i) {
    const int64_t rank = samplers_[table].Sample(rng_);
    feature->add_ids(scatters_[table].Map(rank - 1));
    if (options_.weights) feature->add_weights(weight(rng_));
  }
}

void RequestGenerator::Next(fuserank::v1::RankRequest* request) {
  request->Clear();
  request->set_request_id(absl::StrCat("bench-", next_id_++));
  request->set_top_k(options_.top_k);
  if (!options_.model_name.empty()) request->set_model(options_.model_name);
  std::uniform_real_distribution<float> dense(0.0f, 1.0f);
  for (int t : user_tables_) FillFeature(t, request->add_user_features());
  for (int i = 0; i < spec_.dense_user; ++i) request->add_user_dense(dense(rng_));
  for (int c = 0; c < options_.candidates; ++c) {
    fuserank::v1::Candidate* candidate = request->add_candidates();
    for (int t : item_tables_) FillFeature(t, candidate->add_features());
    for (int i = 0; i < spec_.dense_item; ++i) candidate->add_dense(dense(rng_));
    // The first item table is usually the item id; echo its first id, else the position.
    candidate->set_item_id(item_tables_.empty() ? c : candidate->features(0).ids(0));
  }
}

namespace {

// About the serialized size of one request (an id's varint and its tags as 10 bytes).
double EstimatedRequestBytes(const engine::ModelSpec& spec, const RequestOptions& options) {
  double user = spec.dense_user * 4.0, item = 16 + spec.dense_item * 4.0;
  for (const engine::TableSpec& table : spec.tables) {
    const double feature =
        8 + table.name.size() + options.bag * (10.0 + (options.weights ? 4.0 : 0.0));
    (table.side == engine::Side::kUser ? user : item) += feature;
  }
  return 64 + user + item * options.candidates;
}

}  // namespace

absl::Status ValidateRequestOptions(const engine::ModelSpec& spec, const RequestOptions& options,
                                    int size) {
  if (options.candidates < 0 || options.candidates > kMaxCandidates) {
    return absl::InvalidArgumentError(absl::StrCat("--candidates: want 0..", kMaxCandidates,
                                                   " (the largest server.max_candidates), got ",
                                                   options.candidates));
  }
  if (options.bag < 1 || options.bag > kMaxBag) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bag: want 1..", kMaxBag, " (the largest server.max_ids_per_feature), got ",
                     options.bag));
  }
  // !(x >= 0) also refuses NaN; an infinite exponent would never draw a rank.
  if (!(options.zipf_alpha >= 0) || !std::isfinite(options.zipf_alpha)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--zipf: want a finite number >= 0, got ", options.zipf_alpha));
  }
  if (size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--requests_pool: want at least 1 request, got ", size));
  }
  const double request_bytes = EstimatedRequestBytes(spec, options);
  if (request_bytes * size > kMaxPoolBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--requests_pool=%d requests of --candidates=%d, --bag=%d would take about %.1f GiB (%.0f "
        "bytes a request), over %.0f GiB: ask for fewer",
        size, options.candidates, options.bag, request_bytes * size / (1 << 30), request_bytes,
        kMaxPoolBytes / (1 << 30)));
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestPool> BuildRequestPool(const engine::ModelSpec& spec,
                                             const RequestOptions& options, int size) {
  if (absl::Status valid = ValidateRequestOptions(spec, options, size); !valid.ok()) return valid;
  RequestPool pool;
  pool.serialized.resize(size);
  RequestGenerator generator(spec, options);
  fuserank::v1::RankRequest request;
  double bytes = 0;
  for (int i = 0; i < size; ++i) {
    generator.Next(&request);
    if (!request.SerializeToString(&pool.serialized[i])) {
      return absl::InternalError("could not serialize a RankRequest");
    }
    bytes += static_cast<double>(pool.serialized[i].size());
  }
  pool.mean_bytes = bytes / size;
  const uint32_t n = static_cast<uint32_t>(options.candidates);
  pool.expected_items =
      static_cast<int>(options.top_k == 0 ? n : std::min<uint32_t>(options.top_k, n));
  return pool;
}

}  // namespace fuserank::bench
