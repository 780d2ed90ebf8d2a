// Model specs of the end-to-end tests, written out field by field: a spec and a table in
// one call each, and the dot and concat models that more than one e2e suite serves (each
// suite names its own version). Pure functions.
#ifndef FUSERANK_TESTS_E2E_MODEL_SPEC_UTIL_H_
#define FUSERANK_TESTS_E2E_MODEL_SPEC_UTIL_H_

#include <cstdint>
#include <string>

#include "engine/model_spec.h"

namespace fuserank::testing {

// A spec with no tables, dense features or layers yet; weights "<name>.safetensors".
engine::ModelSpec E2eSpec(const std::string& name, engine::Interaction interaction,
                          engine::DType dtype, const std::string& version);

engine::TableSpec E2eTable(const std::string& name, engine::Side side, int64_t rows, int dim,
                           engine::Pooling pooling = engine::Pooling::kSum,
                           engine::Oov oov = engine::Oov::kModulo);

// "dot32": dot, fp32; user_a (1000 rows), user_b (50, oov: reject), item_a (1000, mean),
// item_b (200), item_c (30, oov: reject), all dim 8; dense 3 + 2; bottom_mlp [16, 8],
// top_mlp [16, 8, 1].
engine::ModelSpec Dot32Spec(const std::string& version);

// "concat16": concat, fp16, no user tables; item_x (500 rows, dim 4, mean), item_y (100,
// dim 6); dense 2 + 2; top_mlp [12, 1].
engine::ModelSpec Concat16Spec(const std::string& version);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_MODEL_SPEC_UTIL_H_
