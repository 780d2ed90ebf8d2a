// Model building refuses tensors that disagree with the spec, naming each: a table or dense
// dtype, a shape, a byte count, a missing tensor, one not in the spec, a non-finite dense
// weight, a linear cross whose fold overflows float32, an invalid spec, int8 tables
// without their quantized tensors.
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
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
using ::testing::Not;

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

// The message names ten extra tensors and counts the rest: a file of a million stray
// tensors gives a message short enough to log, not megabytes of names.
TEST(ModelTest, NamesTenTensorsNotInTheSpecAndCountsTheRest) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 4);
  for (int i = 0; i < 25; ++i) {
    w.tensors[absl::StrFormat("extra.%02d", i)] = w.tensors["top_mlp.2.bias"];
  }
  const absl::Status status = BuildWith(w);
  EXPECT_THAT(status.message(),
              HasSubstr("tensors not in the spec: 'extra.00', 'extra.01', 'extra.02', 'extra.03', "
                        "'extra.04', 'extra.05', 'extra.06', 'extra.07', 'extra.08', 'extra.09' "
                        "... and 15 more"));
  EXPECT_THAT(status.message(), Not(HasSubstr("extra.10")));
}

TEST(ModelTest, RefusesNonFiniteDenseWeights) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 5);
  const float nan = std::nanf("");
  std::memcpy(w.bytes["bottom_mlp.0.weight"].data() + 4 * 7, &nan, 4);
  EXPECT_THAT(BuildWith(w).message(), HasSubstr("tensor 'bottom_mlp.0.weight': element 7 is nan"));
}

// interaction: linear folds the cross into top_mlp.0 as one float32 layer: finite values
// whose products pass float's range (1e30 x 1e30) would serve Inf, so they are refused.
TEST(ModelTest, RefusesALinearCrossWhoseFoldIsNotFinite) {
  const ModelSpec spec = TestSpec(DType::kF32, Interaction::kLinear);
  Weights w = RandomWeights(spec, 7);
  ASSERT_TRUE(Model::FromTensors(spec, w.tensors).ok());
  const float big = 1e30f;
  for (const char* name : {"cross.weight", "top_mlp.0.weight"}) {
    std::vector<std::byte>& bytes = w.bytes[name];
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) std::memcpy(bytes.data() + i, &big, 4);
  }
  const absl::Status status = Model::FromTensors(spec, w.tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("folding cross.weight and cross.bias into top_mlp.0.weight and "
                        "top_mlp.0.bias gives a weight that is not a finite float32"));
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
