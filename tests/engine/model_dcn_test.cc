// Loading `interaction: dcn`: the cross layers' tensors of SPEC section 2 (low rank V_l,
// U_l; full rank W_l; bias b_l) checked by name and shape, copied out in order, counted
// in the file size and the memory estimate, and every problem named by its tensor.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "engine/model.h"
#include "engine/model_memory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using fuserank::testing::BuildTestModel;
using fuserank::testing::MakeRandomModel;
using fuserank::testing::TestModel;
using ::testing::AllOf;
using ::testing::HasSubstr;

// concat(V) = z (8) + 8 + 8 = 24 wide.
ModelSpec DcnSpec(int layers, int low_rank) {
  ModelSpec spec = fuserank::testing::SmallSpec(1, 1, 20, 8);
  spec.name = "dcn";
  spec.interaction = Interaction::kDcn;
  spec.dcn = {layers, low_rank};
  return spec;
}

TEST(ModelDcnTest, LoadsLowRankLayersInOrder) {
  const TestModel test = MakeRandomModel(DcnSpec(3, 5), 11);
  absl::StatusOr<std::shared_ptr<const Model>> model = BuildTestModel(test);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->dcn().size(), 3u);
  for (int l = 0; l < 3; ++l) {
    const CrossLayer& layer = (*model)->dcn()[l];
    EXPECT_EQ(layer.down.in, 24);
    EXPECT_EQ(layer.down.out, 5);
    EXPECT_EQ(layer.up.in, 5);
    EXPECT_EQ(layer.up.out, 24);
    const std::string prefix = "dcn." + std::to_string(l);
    EXPECT_EQ(layer.down.weight, test.weights.at(prefix + ".V.weight"));
    EXPECT_EQ(layer.up.weight, test.weights.at(prefix + ".U.weight"));
    EXPECT_EQ(layer.up.bias, test.weights.at(prefix + ".bias"));
  }
  EXPECT_EQ((*model)->top_mlp()[0].in, 24);
}

TEST(ModelDcnTest, LoadsFullRankLayers) {
  const TestModel test = MakeRandomModel(DcnSpec(2, 0), 12);
  absl::StatusOr<std::shared_ptr<const Model>> model = BuildTestModel(test);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->dcn().size(), 2u);
  EXPECT_EQ((*model)->dcn()[1].down.out, 0);
  EXPECT_EQ((*model)->dcn()[1].up.in, 24);
  EXPECT_EQ((*model)->dcn()[1].up.weight, test.weights.at("dcn.1.W.weight"));
}

TEST(ModelDcnTest, LoadsFromAFileWhoseSizeTheSpecExplains) {
  const TestModel test = MakeRandomModel(DcnSpec(2, 4), 13);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("fuserank_dcn_" + std::to_string(::getpid())))
          .string();
  absl::StatusOr<std::string> path = fuserank::testing::WriteTestModel(test, dir);
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(*path);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->spec().dcn.layers, 2);
  EXPECT_EQ((*model)->spec().dcn.low_rank, 4);
  EXPECT_EQ((*model)->dcn()[1].up.weight, test.weights.at("dcn.1.U.weight"));
}

TEST(ModelDcnTest, NamesAMissingOrMisshapedTensor) {
  TestModel test = MakeRandomModel(DcnSpec(2, 5), 14);
  test.weights.erase("dcn.1.V.weight");
  test.shapes.erase("dcn.1.V.weight");
  test.shapes["dcn.0.U.weight"] = {5, 24};  // V's orientation: [R, d0] instead of [d0, R]
  const absl::Status status = BuildTestModel(test).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("tensor 'dcn.1.V.weight' is missing (expected F32 [5, 24])"),
                    HasSubstr("tensor 'dcn.0.U.weight': expected F32 [24, 5], got F32 [5, 24]")));
}

TEST(ModelDcnTest, FullRankSpecRefusesLowRankTensors) {
  TestModel test = MakeRandomModel(DcnSpec(1, 3), 15);
  test.spec.dcn.low_rank = 0;
  const absl::Status status = BuildTestModel(test).status();
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("tensor 'dcn.0.W.weight' is missing (expected F32 [24, 24])"),
                    HasSubstr("tensors not in the spec: 'dcn.0.U.weight', 'dcn.0.V.weight'")));
}

TEST(ModelDcnTest, RefusesANonFiniteBias) {
  TestModel test = MakeRandomModel(DcnSpec(2, 0), 16);
  test.weights["dcn.1.bias"][3] = NAN;
  const absl::Status status = BuildTestModel(test).status();
  EXPECT_THAT(status.message(), HasSubstr("tensor 'dcn.1.bias': element 3 is nan"));
}

TEST(ModelDcnTest, TensorsAndMemoryCountTheCrossLayers) {
  const ModelSpec low = DcnSpec(3, 5);
  ModelSpec plain = low;
  plain.interaction = Interaction::kConcat;
  plain.dcn = {};
  // Per layer: V [5, 24] + U [24, 5] + bias [24] floats.
  EXPECT_EQ(SpecTensorBytes(low) - SpecTensorBytes(plain), 3u * (120 + 120 + 24) * 4);
  const ModelMemory with = EstimateModelMemory(low, 0, ServingShape{});
  const ModelMemory without = EstimateModelMemory(plain, 0, ServingShape{});
  EXPECT_GE(with.dense - without.dense, 3u * (120 + 120 + 24) * 4);
  EXPECT_GT(with.plan, without.plan);
  EXPECT_GT(with.scratch, without.scratch);
}

// Full rank over a concat width of 2^20: W_l alone is 4 TiB; refused before any copy.
TEST(ModelDcnTest, AHugeFullRankLayerIsRefusedByTheMemoryLimit) {
  ModelSpec spec;
  spec.name = "wide";
  spec.weights_path = "unused";
  spec.dense_user = 1 << 20;
  spec.interaction = Interaction::kDcn;
  spec.dcn = {1, 0};
  spec.top_mlp = {1};
  ModelLoadOptions options;
  options.max_bytes = uint64_t{1} << 30;
  const absl::Status status = Model::FromTensors(spec, {}, options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("the model needs 8.0 TiB"),
                                      HasSubstr("more than the limit of 1.0 GiB")));
}

}  // namespace
}  // namespace fuserank::engine
