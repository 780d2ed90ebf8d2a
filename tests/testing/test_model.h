// Test models whose weights the test itself holds: random (seeded) weights for any
// ModelSpec, kept as floats so a reference can recompute scores independently, written
// to disk as spec YAML + safetensors or built in memory. Plain data, not thread-safe.
#ifndef FUSERANK_TESTS_TESTING_TEST_MODEL_H_
#define FUSERANK_TESTS_TESTING_TEST_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model.h"
#include "engine/model_spec.h"

namespace fuserank::testing {

struct TestModel {
  engine::ModelSpec spec;
  // Every tensor of SPEC section 2 by name, row-major, as float. Table values are
  // multiples of 1/256 in [-0.5, 0.5], exact in fp16 and bf16, so the stored dtype
  // changes no value.
  std::map<std::string, std::vector<float>> weights;
  std::map<std::string, std::vector<int64_t>> shapes;
};

// Input width of top_mlp[0] in the file: concat width (concat, dcn), dot pairs (+ z), or
// cross_dim.
int TopInputWidth(const engine::ModelSpec& spec);

// Fills every tensor `spec` needs with seeded random values.
TestModel MakeRandomModel(engine::ModelSpec spec, uint64_t seed);

// Writes <dir>/<spec.name>.yaml and .safetensors (tables in spec.embedding_dtype);
// returns the path of the YAML file.
absl::StatusOr<std::string> WriteTestModel(const TestModel& model, const std::string& dir);

// The same model in memory (Model::FromTensors).
absl::StatusOr<std::shared_ptr<const engine::Model>> BuildTestModel(const TestModel& model);

// `model` with table `table` moved to storage: redis (no rows, its weight dropped), as
// the remote tier's tests serve it.
TestModel WithRedisTable(TestModel model, int table);

// A small spec: `user` and `item` tables named user_<i>/item_<i> of `rows` rows and
// width `dim`, dense {user: 2, item: 3}, bottom_mlp [8, dim], dot, top_mlp [8, 1].
engine::ModelSpec SmallSpec(int user, int item, int64_t rows, int dim);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_TESTING_TEST_MODEL_H_
