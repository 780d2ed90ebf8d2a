// Model building refuses tensors that disagree with the spec, naming each: a table or dense
// dtype, a shape, a byte count, a missing tensor, one not in the spec, a non-finite dense
// weight, an invalid spec, int8 tables without their quantized tensors.
#include <cmath>
#include <cstring>

#include "engine/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model_test_util.h"

namespace fuserank::engine {
namespace {

using test::RandomWeights;
using test::TestSpec;
using test::Weights;
using ::testing::HasSubstr;

absl::Status BuildWith(const Weights& w, DType dtype = DType::kF32) {
  return Model::FromTensors(TestSpec(dtype, Interaction::kDot), w.tensors).status();
}

TEST(ModelTest, RefusesWrongTableDtype) {
  Weights w = RandomWeights(TestSpec(DType::kF16, Interaction::kDot), 1);
  absl::Status status = BuildWith(w, DType::kF32);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      status.message(),
      HasSubstr("tensor 'embeddings.user_a.weight': expected F32 [50, 8], got F16 [50, 8]"));
}

TEST(ModelTest, RefusesWrongDenseDtype) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 1);
  w.tensors["top_mlp.1.bias"].dtype = "F64";
  w.tensors["top_mlp.1.bias"].nbytes *= 2;
  EXPECT_THAT(BuildWith(w).message(),
              HasSubstr("tensor 'top_mlp.1.bias': expected F32 [6], got F64 [6]"));
}

TEST(ModelTest, RefusesWrongShape) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 2);
  w.tensors["bottom_mlp.1.weight"].shape = {16, 8};  // transposed
  EXPECT_THAT(BuildWith(w).message(),
              HasSubstr("tensor 'bottom_mlp.1.weight': expected F32 [8, 16], got F32 [16, 8]"));
}

TEST(ModelTest, RefusesByteCountThatDisagreesWithShape) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 2);
  w.tensors["top_mlp.2.weight"].nbytes -= 4;
  EXPECT_THAT(BuildWith(w).message(), HasSubstr("tensor 'top_mlp.2.weight': holds 20 bytes"));
}

TEST(ModelTest, RefusesMissingTensor) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 3);
  w.Remove("embeddings.item_a.weight");
  w.Remove("top_mlp.0.bias");
  absl::Status status = BuildWith(w);
  EXPECT_THAT(status.message(),
              HasSubstr("tensor 'embeddings.item_a.weight' is missing (expected F32 [40, 8])"));
  EXPECT_THAT(status.message(), HasSubstr("tensor 'top_mlp.0.bias' is missing"));
}

TEST(ModelTest, RefusesTensorsNotInTheSpec) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 4);
  w.tensors["top_mlp.3.weight"] = w.tensors["top_mlp.2.weight"];
  absl::Status status = BuildWith(w);
  EXPECT_THAT(status.message(), HasSubstr("tensors not in the spec: 'top_mlp.3.weight'"));
  // A typo'd name is both missing and extra.
  w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 4);
  w.tensors["embeddings.usera.weight"] = w.tensors["embeddings.user_a.weight"];
  w.Remove("embeddings.user_a.weight");
  status = BuildWith(w);
  EXPECT_THAT(status.message(), HasSubstr("'embeddings.user_a.weight' is missing"));
  EXPECT_THAT(status.message(), HasSubstr("not in the spec: 'embeddings.usera.weight'"));
}

TEST(ModelTest, RefusesNonFiniteDenseWeights) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 5);
  const float nan = std::nanf("");
  std::memcpy(w.bytes["bottom_mlp.0.weight"].data() + 4 * 7, &nan, 4);
  EXPECT_THAT(BuildWith(w).message(), HasSubstr("tensor 'bottom_mlp.0.weight': element 7 is nan"));
}

TEST(ModelTest, RefusesInvalidSpecAndInt8WithoutQuantizedTensors) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 6);
  ModelSpec spec = TestSpec(DType::kF32, Interaction::kDot);
  spec.top_mlp.back() = 2;
  EXPECT_THAT(Model::FromTensors(spec, w.tensors).status().message(), HasSubstr("top_mlp[2]"));
  spec = TestSpec(DType::kInt8, Interaction::kDot);
  absl::Status status = Model::FromTensors(spec, w.tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor 'embeddings.user_a.weight': expected I8"));
  EXPECT_THAT(status.message(), HasSubstr("tensor 'embeddings.user_a.qparams' is missing"));
}

}  // namespace
}  // namespace fuserank::engine
