// Builds valid fuserank.v1.RankRequest messages for a model spec: Zipf-distributed ids
// per table (scattered over the rows), fixed-size bags, uniform dense floats. The pool is
// built and serialized once before a run, so request building is never measured.
// Plain functions; a RequestGenerator is not thread-safe (it owns its RNG).
#ifndef FUSERANK_BENCH_LOADGEN_REQUEST_POOL_H_
#define FUSERANK_BENCH_LOADGEN_REQUEST_POOL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/loadgen/zipf_sampler.h"
#include "engine/model_spec.h"
#include "fuserank/v1/ranker.pb.h"

namespace fuserank::bench {

struct RequestOptions {
  int candidates = 16;       // candidates per request
  uint32_t top_k = 10;       // RankRequest.top_k
  int bag = 1;               // ids per feature (every table, user and item)
  double zipf_alpha = 1.05;  // 0: uniform ids
  bool scatter = true;       // scatter Zipf ranks over the rows (see RowScatter)
  bool weights = false;      // send one weight per id, uniform in [0.5, 1.5)
  std::string model_name;    // RankRequest.model; empty: the server's default model
  uint64_t seed = 1;
};

class RequestGenerator {
 public:
  // REQUIRES: `spec` is valid; ValidateRequestOptions(spec, options, 1) is OK (a NaN or
  // infinite zipf_alpha aborts in ZipfSampler).
  RequestGenerator(const engine::ModelSpec& spec, const RequestOptions& options);

  // The next request; request_id is "bench-<n>".
  void Next(fuserank::v1::RankRequest* request);

 private:
  void FillFeature(int table, fuserank::v1::Feature* feature);

  const engine::ModelSpec& spec_;
  RequestOptions options_;
  std::mt19937_64 rng_;
  std::vector<ZipfSampler> samplers_;  // one per table
  std::vector<RowScatter> scatters_;   // one per table
  std::vector<int> user_tables_;
  std::vector<int> item_tables_;
  int64_t next_id_ = 0;
};

struct RequestPool {
  std::vector<std::string> serialized;  // distinct requests, cycled by the runner
  int expected_items = 0;               // items every OK response must carry
  double mean_bytes = 0;
};

// The largest --candidates and --bag: the largest server.max_candidates and
// server.max_ids_per_feature a server can be configured with (2^20).
inline constexpr int kMaxCandidates = 1 << 20;
inline constexpr int kMaxBag = 1 << 20;
// The most bytes a pool may take (an estimate from the options, checked before any is
// built): beyond, a run would exhaust the memory of most machines rather than load a server.
inline constexpr double kMaxPoolBytes = 4.0 * (1 << 30);

// InvalidArgument, naming the flag (--candidates, --bag, --zipf, --requests_pool), unless
// `options` and `size` describe a pool that can be built: candidates in 0..kMaxCandidates,
// bag in 1..kMaxBag, a finite zipf >= 0, size >= 1, about kMaxPoolBytes at most.
absl::Status ValidateRequestOptions(const engine::ModelSpec& spec, const RequestOptions& options,
                                    int size);

// Builds `size` distinct serialized requests; InvalidArgument as ValidateRequestOptions.
absl::StatusOr<RequestPool> BuildRequestPool(const engine::ModelSpec& spec,
                                             const RequestOptions& options, int size);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_LOADGEN_REQUEST_POOL_H_
