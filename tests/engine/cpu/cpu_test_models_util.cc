#include "tests/engine/cpu/cpu_test_models_util.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/dtype_reference_util.h"

namespace fuserank::engine::test {

using fuserank::testing::BuildTestModel;
using fuserank::testing::MakeRandomModel;
using fuserank::testing::TestModel;

std::string VariantName(Variant v) {
  const char* names[] = {"Full",          "NoDense",       "NoBottom",
                         "UserDenseOnly", "ItemDenseOnly", "NoUserTables",
                         "NoItemTables",  "SingleLayers",  "OddDims"};
  return names[static_cast<int>(v)];
}

const char* DTypeLabel(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kInt8:
      return "I8";
  }
  return "?";
}

ModelSpec VariantSpec(Interaction interaction, DType dtype, Variant variant, std::mt19937_64& rng) {
  ModelSpec spec;
  spec.name = "cpu_test";
  spec.version = "1";
  spec.weights_path = "in-memory.safetensors";
  spec.embedding_dtype = dtype;
  spec.interaction = interaction;
  const int dim = variant == Variant::kOddDims && interaction == Interaction::kDot ? 17 : 8;
  // Sides interleaved in spec order so that spec order and per-side order differ.
  std::vector<Side> sides = {Side::kItem, Side::kUser, Side::kItem, Side::kItem, Side::kUser};
  if (variant == Variant::kNoUserTables) sides = {Side::kItem, Side::kItem, Side::kItem};
  if (variant == Variant::kNoItemTables) sides = {Side::kUser, Side::kUser};
  std::uniform_int_distribution<int64_t> rows(1, 300);
  std::uniform_int_distribution<int> odd_dim(1, 12), coin(0, 1);
  for (size_t t = 0; t < sides.size(); ++t) {
    TableSpec table;
    table.name = absl::StrCat(sides[t] == Side::kUser ? "user_" : "item_", t);
    table.side = sides[t];
    table.rows = t == 0 ? 1 : rows(rng);  // a one-row table: every id maps to row 0
    table.dim =
        variant == Variant::kOddDims && interaction != Interaction::kDot ? odd_dim(rng) : dim;
    table.pooling = coin(rng) ? Pooling::kMean : Pooling::kSum;
    spec.tables.push_back(table);
  }
  spec.dense_user = 3;
  spec.dense_item = 4;
  spec.bottom_mlp = {16, dim};
  spec.top_mlp = {12, 6, 1};
  spec.cross_dim = interaction == Interaction::kLinear ? 10 : 0;
  if (interaction == Interaction::kDcn) {  // low rank 3, or full rank in every other variant
    spec.dcn = {variant == Variant::kSingleLayers ? 1 : 2, static_cast<int>(variant) % 2 ? 0 : 3};
  }
  switch (variant) {
    case Variant::kNoDense:
      spec.dense_user = spec.dense_item = 0;
      spec.bottom_mlp.clear();
      break;
    case Variant::kNoBottom:
      spec.bottom_mlp.clear();
      spec.dense_item = dim - spec.dense_user;  // dot needs z of width dim
      break;
    case Variant::kUserDenseOnly:
      spec.dense_item = 0;
      break;
    case Variant::kItemDenseOnly:
      spec.dense_user = 0;
      break;
    case Variant::kSingleLayers:
      spec.bottom_mlp = {dim};
      spec.top_mlp = {1};
      break;
    default:
      break;
  }
  return spec;
}

namespace {

// Replaces the tables' values by values exact in the dtype that cover many exponents,
// so the reference (the floats) is exactly the decoded stored values.
void UseExactTableValues(TestModel& model, std::mt19937_64& rng) {
  for (const TableSpec& table : model.spec.tables) {
    for (float& v : model.weights[absl::StrCat("embeddings.", table.name, ".weight")]) {
      v = test::RandomExactValue(model.spec.embedding_dtype, rng) * 0.5f;
    }
  }
}

// int8 tables: draws q and a (scale, bias) per row, keeps the dequantized values (exact
// in float: multiples of 1/512 below 2^12 / 512) as the reference's table values, and
// builds the model from I8 tables with F32 qparams (everything else F32).
absl::StatusOr<std::shared_ptr<const Model>> BuildInt8Model(TestModel& model,
                                                            std::mt19937_64& rng) {
  std::vector<std::vector<std::byte>> storage;
  storage.reserve(model.weights.size() + model.spec.tables.size());
  TensorMap tensors;
  auto add = [&](const std::string& name, const char* dtype, std::vector<int64_t> shape,
                 const void* data, size_t bytes) {
    const std::byte* p = static_cast<const std::byte*>(data);
    storage.emplace_back(p, p + bytes);
    tensors[name] = TensorView{dtype, std::move(shape), storage.back().data(), bytes};
  };
  std::uniform_int_distribution<int> q_dist(-128, 127), step(1, 16), offset(-64, 64);
  for (const TableSpec& table : model.spec.tables) {
    const std::string name = absl::StrCat("embeddings.", table.name, ".weight");
    std::vector<float>& values = model.weights[name];
    std::vector<int8_t> q(values.size());
    std::vector<float> qparams;
    for (int64_t r = 0; r < table.rows; ++r) {
      const float scale = step(rng) / 512.0f, bias = offset(rng) / 128.0f;
      qparams.push_back(scale);
      qparams.push_back(bias);
      for (int j = 0; j < table.dim; ++j) {
        q[r * table.dim + j] = static_cast<int8_t>(q_dist(rng));
        values[r * table.dim + j] = scale * q[r * table.dim + j] + bias;
      }
    }
    add(name, "I8", {table.rows, table.dim}, q.data(), q.size());
    add(absl::StrCat("embeddings.", table.name, ".qparams"), "F32", {table.rows, 2}, qparams.data(),
        qparams.size() * sizeof(float));
  }
  for (const auto& [name, values] : model.weights) {
    if (name.rfind("embeddings.", 0) == 0) continue;
    add(name, "F32", model.shapes.at(name), values.data(), values.size() * sizeof(float));
  }
  return Model::FromTensors(model.spec, tensors);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Model>> BuildVariantModel(const ModelSpec& spec, uint64_t seed,
                                                               std::mt19937_64& rng,
                                                               TestModel* test_model) {
  *test_model = MakeRandomModel(spec, seed);
  if (spec.embedding_dtype == DType::kInt8) return BuildInt8Model(*test_model, rng);
  UseExactTableValues(*test_model, rng);
  return BuildTestModel(*test_model);
}

std::vector<std::vector<float>> ScoresByIndex(Backend& backend, int worker, const Batch& batch,
                                              BatchResult& result) {
  const absl::Status status = backend.Run(worker, batch, &result);
  EXPECT_TRUE(status.ok()) << status;
  std::vector<std::vector<float>> scores(batch.num_requests());
  if (!status.ok()) return scores;
  for (int r = 0; r < batch.num_requests(); ++r) {
    const int count = batch.candidate_begin[r + 1] - batch.candidate_begin[r];
    scores[r].assign(count, NAN);
    EXPECT_EQ(result.result_begin[r + 1] - result.result_begin[r], batch.top_k[r]);
    for (uint32_t i = result.result_begin[r]; i < result.result_begin[r + 1]; ++i) {
      const ScoredIndex& item = result.items[i];
      EXPECT_LT(item.index, static_cast<uint32_t>(count));
      if (item.index < static_cast<uint32_t>(count)) scores[r][item.index] = item.score;
      if (i > result.result_begin[r]) {  // best first, ties by lower index
        const ScoredIndex& prev = result.items[i - 1];
        EXPECT_TRUE(prev.score > item.score ||
                    (prev.score == item.score && prev.index < item.index))
            << "request " << r << " rank " << i - result.result_begin[r];
      }
    }
  }
  return scores;
}

}  // namespace fuserank::engine::test
