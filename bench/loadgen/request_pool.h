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
  // REQUIRES: `spec` is valid; options.candidates >= 0, options.bag >= 1.
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

// Builds `size` distinct serialized requests (size >= 1).
absl::StatusOr<RequestPool> BuildRequestPool(const engine::ModelSpec& spec,
                                             const RequestOptions& options, int size);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_LOADGEN_REQUEST_POOL_H_
