// The independent reference for end-to-end tests: SPEC section 2's forward pass written
// plainly in double precision over a TestModel's own weights, seeded random requests and
// the features of hand-written ones.
// Pure functions.
#ifndef FUSERANK_TESTS_E2E_REFERENCE_UTIL_H_
#define FUSERANK_TESTS_E2E_REFERENCE_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fuserank/v1/ranker.pb.h"
#include "tests/testing/test_model.h"

namespace fuserank::testing {

// sigmoid(top_mlp(h)) of every candidate of `request`, in request order. The request must
// be valid for the model (ids of `oov: reject` tables in range).
std::vector<double> ReferenceScores(const TestModel& model, const v1::RankRequest& request);

// A valid random request: each table present with probability 0.8 with 0..4 ids (out of
// range ids for `oov: modulo` tables included), weights on about half the bags, 1..
// `max_candidates` candidates, a random top_k (0, small, or past the end).
v1::RankRequest RandomRequest(const TestModel& model, uint64_t seed, int max_candidates);

// Appends a feature `name` with `ids` (and `weights`, none when empty) to `features`.
void AddFeature(google::protobuf::RepeatedPtrField<v1::Feature>* features, const std::string& name,
                std::vector<int64_t> ids, std::vector<float> weights = {});

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_REFERENCE_UTIL_H_
