// Test models for the CPU engine tests: seeded random specs in shape variants (dense or
// not, bottom MLP or not, tables on one side only, odd dims, ...), their weights held by
// a fuserank::testing::TestModel so the reference can recompute scores, tables exact in
// their dtype (row-wise int8 included), and a helper that runs a batch and returns every
// score by candidate index while checking the ranking order. Not thread-safe.
#ifndef FUSERANK_TESTS_ENGINE_CPU_CPU_TEST_MODELS_UTIL_H_
#define FUSERANK_TESTS_ENGINE_CPU_CPU_TEST_MODELS_UTIL_H_

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/batch.h"
#include "engine/model.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine::test {

enum class Variant {
  kFull,           // user + item tables interleaved, both dense, bottom MLP, 3 top layers
  kNoDense,        // no dense features: no z
  kNoBottom,       // dense features without a bottom MLP: z = x
  kUserDenseOnly,  // dense_item = 0
  kItemDenseOnly,  // dense_user = 0
  kNoUserTables,   // item tables only
  kNoItemTables,   // user tables only (candidates differ by dense only)
  kSingleLayers,   // bottom [dim], top [1]
  kOddDims,        // dot: dim 17; concat / linear: a different dim per table
};

std::string VariantName(Variant variant);
const char* DTypeLabel(DType dtype);  // "F32", "F16", "BF16", "I8"

// A valid spec of the variant; table rows, dims (kOddDims) and pooling drawn from `rng`.
ModelSpec VariantSpec(Interaction interaction, DType dtype, Variant variant, std::mt19937_64& rng);

// Random weights for `spec` (MakeRandomModel) with table values exact in the spec's
// dtype, and the model built from them: `test_model` then holds, as floats, exactly the
// values the engine dequantizes.
absl::StatusOr<std::shared_ptr<const Model>> BuildVariantModel(
    const ModelSpec& spec, uint64_t seed, std::mt19937_64& rng,
    fuserank::testing::TestModel* test_model);

// Runs `batch` (every top_k = all) on `worker` and returns each request's scores by
// candidate index; expects OK, K items per request, best first with ties by index.
std::vector<std::vector<float>> ScoresByIndex(Backend& backend, int worker, const Batch& batch,
                                              BatchResult& result);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_CPU_CPU_TEST_MODELS_UTIL_H_
