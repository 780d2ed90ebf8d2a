// An independent reference for the engine tests: requests as a client sends them (raw
// ids, optional weights), the SPEC section 2 forward pass in double precision computed
// from the test model's own float weights, and the engine Batch for those requests
// (ids mapped by the spec's rule, written out here). Not thread-safe; plain data.
#ifndef FUSERANK_TESTS_ENGINE_CPU_CPU_REFERENCE_UTIL_H_
#define FUSERANK_TESTS_ENGINE_CPU_CPU_REFERENCE_UTIL_H_

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "engine/batch.h"
#include "engine/model.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine::test {

struct RefBag {
  std::vector<int64_t> ids;
  std::vector<float> weights;  // empty: none sent (each weight is 1)
};

struct RefCandidate {
  std::vector<RefBag> bags;  // one per item table, in spec order
  std::vector<float> dense;
};

struct RefRequest {
  std::vector<RefBag> user_bags;  // one per user table, in spec order
  std::vector<float> user_dense;
  std::vector<RefCandidate> candidates;
  uint32_t top_k = 0;  // 0: all
};

// sigmoid(top_mlp(h)) of candidate c, straight from SPEC section 2 in double precision;
// a linear cross is applied unfolded (cross.weight, cross.bias). NaN on a shape mismatch.
double ReferenceScore(const fuserank::testing::TestModel& model, const RefRequest& request, int c);

// The engine batch of `requests`: rows by the spec rule (modulo), weight 1 where none
// were sent, top_k 0 or past the count -> count.
Batch MakeBatch(std::shared_ptr<const Model> model, const std::vector<RefRequest>& requests);

struct RequestShape {
  int candidates = 8;
  int max_bag = 3;           // ids per bag: 0 .. max_bag
  bool weights = true;       // send weights on some bags
  bool out_of_range = true;  // some ids outside [0, rows) (modulo tables only)
};

// A random request for `spec`: empty bags, repeated ids, out-of-range ids (incl. the
// int64 extremes), bags whose weights sum to exactly 0.
RefRequest RandomRequest(const ModelSpec& spec, const RequestShape& shape, std::mt19937_64& rng);

// A model with seeded random weights and a batch of random requests of the given sizes
// (top_k random, 0: all), for tests of what is built from a batch (GPU layout, packer).
struct BatchFixture {
  fuserank::testing::TestModel test_model;
  std::shared_ptr<const Model> model;  // null when the model does not build (a test failure)
  std::vector<RefRequest> requests;
  Batch batch;
};
BatchFixture MakeBatchFixture(ModelSpec spec, uint64_t seed, const std::vector<int>& candidates);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_CPU_CPU_REFERENCE_UTIL_H_
