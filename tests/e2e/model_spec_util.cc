#include "tests/e2e/model_spec_util.h"

namespace fuserank::testing {

using engine::DType;
using engine::Interaction;
using engine::ModelSpec;
using engine::Oov;
using engine::Pooling;
using engine::Side;

ModelSpec E2eSpec(const std::string& name, Interaction interaction, DType dtype,
                  const std::string& version) {
  ModelSpec spec;
  spec.name = name;
  spec.version = version;
  spec.weights_path = name + ".safetensors";
  spec.interaction = interaction;
  spec.embedding_dtype = dtype;
  return spec;
}

engine::TableSpec E2eTable(const std::string& name, Side side, int64_t rows, int dim,
                           Pooling pooling, Oov oov) {
  return {name, side, rows, dim, pooling, oov};
}

ModelSpec Dot32Spec(const std::string& version) {
  ModelSpec dot = E2eSpec("dot32", Interaction::kDot, DType::kF32, version);
  dot.tables = {E2eTable("user_a", Side::kUser, 1000, 8),
                E2eTable("user_b", Side::kUser, 50, 8, Pooling::kSum, Oov::kReject),
                E2eTable("item_a", Side::kItem, 1000, 8, Pooling::kMean),
                E2eTable("item_b", Side::kItem, 200, 8),
                E2eTable("item_c", Side::kItem, 30, 8, Pooling::kSum, Oov::kReject)};
  dot.dense_user = 3;
  dot.dense_item = 2;
  dot.bottom_mlp = {16, 8};
  dot.top_mlp = {16, 8, 1};
  return dot;
}

ModelSpec Concat16Spec(const std::string& version) {
  ModelSpec concat = E2eSpec("concat16", Interaction::kConcat, DType::kF16, version);
  concat.tables = {E2eTable("item_x", Side::kItem, 500, 4, Pooling::kMean),
                   E2eTable("item_y", Side::kItem, 100, 6)};
  concat.dense_user = 2;
  concat.dense_item = 2;
  concat.top_mlp = {12, 1};
  return concat;
}

}  // namespace fuserank::testing
