// What the Model loading tests share: a spec of three tables (two user, one item) in a
// chosen dtype and interaction, random tensors for it kept also as the float values they
// store, a per-test folder, and the spec and weights written there. Test helpers; not
// thread-safe.
#ifndef FUSERANK_TESTS_ENGINE_MODEL_TEST_UTIL_H_
#define FUSERANK_TESTS_ENGINE_MODEL_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/model_spec.h"

namespace fuserank::engine::test {

// A folder of the running test's own, removed with this object.
class ModelTestDir {
 public:
  ModelTestDir();
  ~ModelTestDir();
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Tensors built in memory, each also kept as float values for reference math.
struct Weights {
  std::map<std::string, std::vector<std::byte>> bytes;
  std::map<std::string, std::vector<float>> values;  // as stored (after dtype rounding)
  TensorMap tensors;

  // Adds `v` as tensor `name` of safetensors dtype "F32", "F16" or "BF16".
  void Add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
           std::vector<float> v);
  void Remove(const std::string& name) { tensors.erase(name); }
};

// Model "test" version "3": user_a (50 rows, sum, modulo), item_a (40 rows, mean, reject),
// user_b (30 rows), all of width 8 in `dtype`; dense 3 + 2, bottom MLP 16-8, top MLP 12-6-1,
// a cross of 10 with kLinear.
ModelSpec TestSpec(DType dtype, Interaction interaction);

// Every tensor `spec` names, uniform in [-1, 1).
Weights RandomWeights(const ModelSpec& spec, uint32_t seed);

// Writes spec + weights into `dir`; returns the spec path.
std::string WriteModel(const ModelTestDir& dir, ModelSpec spec, const TensorMap& tensors);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_MODEL_TEST_UTIL_H_
