#include "tests/testing/test_model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_dtype.h"
#include "engine/safetensors.h"

namespace fuserank::testing {
namespace {

using engine::Interaction;
using engine::ModelSpec;

void AddLayers(const std::string& prefix, int in, const std::vector<int>& widths,
               std::mt19937_64* rng, TestModel* model) {
  for (size_t i = 0; i < widths.size(); ++i) {
    const int out = widths[i];
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    std::uniform_real_distribution<float> dist(-bound, bound);
    const std::string name = absl::StrCat(prefix, ".", i);
    auto& weight = model->weights[absl::StrCat(name, ".weight")];
    weight.resize(static_cast<size_t>(out) * in);
    for (float& w : weight) w = dist(*rng);
    auto& bias = model->weights[absl::StrCat(name, ".bias")];
    bias.resize(out);
    for (float& b : bias) b = 0.1f * dist(*rng);
    model->shapes[absl::StrCat(name, ".weight")] = {out, in};
    model->shapes[absl::StrCat(name, ".bias")] = {out};
    in = out;
  }
}

void AddTensor(const std::string& name, std::vector<int64_t> shape, float bound,
               std::mt19937_64* rng, TestModel* model) {
  std::uniform_real_distribution<float> dist(-bound, bound);
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  auto& values = model->weights[name];
  values.resize(n);
  for (float& v : values) v = dist(*rng);
  model->shapes[name] = std::move(shape);
}

// dcn.<l>.{V,U}.weight (low rank) or W.weight, and bias, scaled so that x_l stays O(1).
void AddDcn(const ModelSpec& spec, std::mt19937_64* rng, TestModel* model) {
  const int64_t d0 = spec.concat_width(), rank = spec.dcn.low_rank;
  for (int l = 0; l < spec.dcn.layers; ++l) {
    const std::string name = absl::StrCat("dcn.", l);
    if (rank > 0) {
      AddTensor(name + ".V.weight", {rank, d0}, 1.0f / std::sqrt(static_cast<float>(d0)), rng,
                model);
      AddTensor(name + ".U.weight", {d0, rank}, 1.0f / std::sqrt(static_cast<float>(rank)), rng,
                model);
    } else {
      AddTensor(name + ".W.weight", {d0, d0}, 1.0f / std::sqrt(static_cast<float>(d0)), rng, model);
    }
    AddTensor(name + ".bias", {d0}, 0.1f, rng, model);
  }
}

// Bytes of a tensor as stored: tables in the embedding dtype, the rest as F32.
std::vector<std::byte> StoredBytes(const std::vector<float>& values, engine::DType dtype) {
  std::vector<std::byte> bytes;
  if (dtype == engine::DType::kF32) {
    bytes.resize(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  bytes.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t bits = dtype == engine::DType::kF16
                        ? engine::FloatToHalf(values[i])
                        : static_cast<uint16_t>(engine::FloatToBits(values[i]) >> 16);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

}  // namespace

int TopInputWidth(const ModelSpec& spec) {
  int z = 0;
  if (spec.dense_total() > 0)
    z = spec.bottom_mlp.empty() ? spec.dense_total() : spec.bottom_mlp.back();
  int concat = z;
  for (const auto& t : spec.tables) concat += t.dim;
  switch (spec.interaction) {
    case Interaction::kConcat:
    case Interaction::kDcn:
      return concat;
    case Interaction::kDot: {
      const int n = static_cast<int>(spec.tables.size()) + (z > 0 ? 1 : 0);
      return z + n * (n - 1) / 2;
    }
    case Interaction::kLinear:
      return spec.cross_dim;
  }
  return 0;
}

TestModel MakeRandomModel(ModelSpec spec, uint64_t seed) {
  TestModel model;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> table_value(-128, 128);
  for (const auto& t : spec.tables) {
    const std::string name = absl::StrCat("embeddings.", t.name, ".weight");
    auto& values = model.weights[name];
    values.resize(static_cast<size_t>(t.rows) * t.dim);
    for (float& v : values) v = static_cast<float>(table_value(rng)) / 256.0f;
    model.shapes[name] = {t.rows, t.dim};
  }
  if (spec.dense_total() > 0)
    AddLayers("bottom_mlp", spec.dense_total(), spec.bottom_mlp, &rng, &model);
  if (spec.interaction == Interaction::kLinear) {
    int concat = spec.dense_total() > 0
                     ? (spec.bottom_mlp.empty() ? spec.dense_total() : spec.bottom_mlp.back())
                     : 0;
    for (const auto& t : spec.tables) concat += t.dim;
    AddLayers("cross", concat, {spec.cross_dim}, &rng, &model);
    // "cross.0.weight" -> "cross.weight" (SPEC names the cross layer without an index).
    model.weights["cross.weight"] = std::move(model.weights["cross.0.weight"]);
    model.weights["cross.bias"] = std::move(model.weights["cross.0.bias"]);
    model.shapes["cross.weight"] = model.shapes["cross.0.weight"];
    model.shapes["cross.bias"] = model.shapes["cross.0.bias"];
    for (const char* old_name : {"cross.0.weight", "cross.0.bias"}) {
      model.weights.erase(old_name);
      model.shapes.erase(old_name);
    }
  }
  if (spec.interaction == Interaction::kDcn) AddDcn(spec, &rng, &model);
  AddLayers("top_mlp", TopInputWidth(spec), spec.top_mlp, &rng, &model);
  model.spec = std::move(spec);
  return model;
}

namespace {

// Tensor views over bytes owned by `storage`.
engine::TensorMap ToTensors(const TestModel& model, std::vector<std::vector<std::byte>>* storage) {
  engine::TensorMap tensors;
  storage->reserve(model.weights.size());
  for (const auto& [name, values] : model.weights) {
    const bool table = name.rfind("embeddings.", 0) == 0;
    const engine::DType dtype = table ? model.spec.embedding_dtype : engine::DType::kF32;
    storage->push_back(StoredBytes(values, dtype));
    engine::TensorView view;
    view.dtype = std::string(engine::SafetensorsDType(dtype));
    view.shape = model.shapes.at(name);
    view.data = storage->back().data();
    view.nbytes = storage->back().size();
    tensors[name] = view;
  }
  return tensors;
}

}  // namespace

absl::StatusOr<std::string> WriteTestModel(const TestModel& model, const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::string base = absl::StrCat(dir, "/", model.spec.name);
  std::vector<std::vector<std::byte>> storage;
  const engine::TensorMap tensors = ToTensors(model, &storage);
  std::vector<std::pair<std::string, engine::TensorView>> list(tensors.begin(), tensors.end());
  absl::Status status = engine::WriteSafetensors(absl::StrCat(base, ".safetensors"), list);
  if (!status.ok()) return status;
  ModelSpec spec = model.spec;
  spec.weights_path = absl::StrCat(base, ".safetensors");
  std::ofstream(absl::StrCat(base, ".yaml")) << engine::ModelSpecToYaml(spec);
  return absl::StrCat(base, ".yaml");
}

absl::StatusOr<std::shared_ptr<const engine::Model>> BuildTestModel(const TestModel& model) {
  std::vector<std::vector<std::byte>> storage;
  const engine::TensorMap tensors = ToTensors(model, &storage);
  ModelSpec spec = model.spec;
  if (spec.weights_path.empty()) spec.weights_path = "in-memory.safetensors";
  return engine::Model::FromTensors(spec, tensors);
}

TestModel WithRedisTable(TestModel model, int table) {
  engine::TableSpec& spec = model.spec.tables[table];
  spec.storage = engine::Storage::kRedis;
  spec.rows = 0;
  const std::string weight = absl::StrCat("embeddings.", spec.name, ".weight");
  model.weights.erase(weight);
  model.shapes.erase(weight);
  return model;
}

ModelSpec SmallSpec(int user, int item, int64_t rows, int dim) {
  ModelSpec spec;
  // Move-assigned: GCC 12 warns falsely (-Wrestrict) on assigning these literals.
  spec.name = std::string("small");
  spec.version = std::string("7");
  spec.weights_path = std::string("small.safetensors");
  for (int i = 0; i < user; ++i) {
    spec.tables.push_back({absl::StrCat("user_", i), engine::Side::kUser, rows, dim});
  }
  for (int i = 0; i < item; ++i) {
    spec.tables.push_back({absl::StrCat("item_", i), engine::Side::kItem, rows, dim});
  }
  spec.dense_user = 2;
  spec.dense_item = 3;
  spec.bottom_mlp = {8, dim};
  spec.interaction = Interaction::kDot;
  spec.top_mlp = {8, 1};
  return spec;
}

}  // namespace fuserank::testing
