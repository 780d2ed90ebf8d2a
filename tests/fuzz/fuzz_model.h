// The model the request fuzz targets decode against, built from random weights (seed 1),
// and the helper that builds it. Aborts through FUZZ_CHECK when a model cannot be built.
#ifndef FUSERANK_TESTS_FUZZ_FUZZ_MODEL_H_
#define FUSERANK_TESTS_FUZZ_FUZZ_MODEL_H_

#include <memory>

#include "engine/model.h"
#include "engine/model_spec.h"

namespace fuserank::fuzz {

// user_0 (100 rows), user_1 (50 rows, oov: reject), item_0 (100 rows), item_1 (10 rows,
// oov: reject, mean pooling); dense {user: 2, item: 3}; width 4. The seed corpora of
// request_decoder, rank_path and infer_request use these names (the models of
// tests/server/request_decoder_test.cc and infer_test_util.cc).
std::shared_ptr<const engine::Model> FuzzModel();

// A model of `spec` with random weights (seed 1).
std::shared_ptr<const engine::Model> BuildFuzzModel(engine::ModelSpec spec);

}  // namespace fuserank::fuzz

#endif  // FUSERANK_TESTS_FUZZ_FUZZ_MODEL_H_
