#include "tests/engine/model_test_util.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <utility>

#include "engine/cpu/cpu_dtype.h"
#include "engine/safetensors.h"
#include "gtest/gtest.h"

namespace fuserank::engine::test {

ModelTestDir::ModelTestDir() {
  path_ = std::filesystem::temp_directory_path() /
          ("fuserank_model_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ModelTestDir::~ModelTestDir() { std::filesystem::remove_all(path_); }

void Weights::Add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                  std::vector<float> v) {
  std::vector<std::byte>& b = bytes[name];
  const size_t element = SafetensorsDTypeSize(dtype);
  b.resize(v.size() * element);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == "F32") {
      std::memcpy(&b[i * 4], &v[i], 4);
    } else {
      const uint16_t h = dtype == "F16" ? FloatToHalf(v[i]) : FloatToBFloat16(v[i]);
      v[i] = dtype == "F16" ? HalfToFloat(h) : BFloat16ToFloat(h);
      std::memcpy(&b[i * 2], &h, 2);
    }
  }
  values[name] = std::move(v);
  tensors[name] = TensorView{dtype, std::move(shape), b.data(), b.size()};
}

ModelSpec TestSpec(DType dtype, Interaction interaction) {
  ModelSpec spec;
  spec.name = "test";
  spec.version = "3";
  spec.weights_path = "test.safetensors";
  spec.embedding_dtype = dtype;
  spec.tables = {{"user_a", Side::kUser, 50, 8, Pooling::kSum, Oov::kModulo},
                 {"item_a", Side::kItem, 40, 8, Pooling::kMean, Oov::kReject},
                 {"user_b", Side::kUser, 30, 8, Pooling::kSum, Oov::kModulo}};
  spec.dense_user = 3;
  spec.dense_item = 2;
  spec.bottom_mlp = {16, 8};
  spec.interaction = interaction;
  spec.cross_dim = interaction == Interaction::kLinear ? 10 : 0;
  spec.top_mlp = {12, 6, 1};
  return spec;
}

Weights RandomWeights(const ModelSpec& spec, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  Weights w;
  const std::string dtype(SafetensorsDType(spec.embedding_dtype));
  for (const TableSpec& t : spec.tables) {
    w.Add("embeddings." + t.name + ".weight", dtype, {t.rows, t.dim}, random(t.rows * t.dim));
  }
  auto layer = [&](const std::string& prefix, int in, int out) {
    w.Add(prefix + ".weight", "F32", {out, in}, random(static_cast<size_t>(out) * in));
    w.Add(prefix + ".bias", "F32", {out}, random(out));
  };
  int in = spec.dense_total();
  for (size_t i = 0; i < spec.bottom_mlp.size(); ++i) {
    layer("bottom_mlp." + std::to_string(i), in, spec.bottom_mlp[i]);
    in = spec.bottom_mlp[i];
  }
  in = spec.interaction_width();
  if (spec.interaction == Interaction::kLinear) {
    layer("cross", spec.concat_width(), spec.cross_dim);
    in = spec.cross_dim;
  }
  for (size_t i = 0; i < spec.top_mlp.size(); ++i) {
    layer("top_mlp." + std::to_string(i), in, spec.top_mlp[i]);
    in = spec.top_mlp[i];
  }
  return w;
}

std::string WriteModel(const ModelTestDir& dir, ModelSpec spec, const TensorMap& tensors) {
  spec.weights_path = dir.File(spec.name + ".safetensors");
  std::vector<std::pair<std::string, TensorView>> list(tensors.begin(), tensors.end());
  EXPECT_TRUE(WriteSafetensors(spec.weights_path, list).ok());
  const std::string path = dir.File(spec.name + ".yaml");
  std::ofstream(path) << ModelSpecToYaml(spec);
  return path;
}

}  // namespace fuserank::engine::test
