// Models for the Batcher tests on fake backends: each request a Batcher takes must pass
// ValidateBatch() against its model, so the fakes' requests are for these. Thread-safe
// (each call builds a new model).
#ifndef FUSERANK_TESTS_ENGINE_BATCHER_TEST_UTIL_H_
#define FUSERANK_TESTS_ENGINE_BATCHER_TEST_UTIL_H_

#include <cstdint>
#include <memory>

#include "engine/model.h"

namespace fuserank::engine::test {

// No tables and one dense item feature per candidate (which the fake backends read as the
// candidate's score): a request is candidate_begin, top_k and item_dense alone.
std::shared_ptr<const Model> DenseScoreModel(uint64_t seed = 1);

// One user table and one item table of `rows` rows, no dense features: a request holds
// one user bag and one item bag per candidate.
std::shared_ptr<const Model> OneTablePerSideModel(int64_t rows = 64);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_BATCHER_TEST_UTIL_H_
