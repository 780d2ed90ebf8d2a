// The model types of the engine core: a dtype's element bytes (against the safetensors
// sizes the weights are stored in), and the widths a spec implies for each interaction,
// counted by hand.
#include "engine/model_types.h"

#include "engine/safetensors.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

TEST(ModelTypesTest, DTypeBytesAreTheStoredElementSizes) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kInt8}) {
    EXPECT_EQ(static_cast<size_t>(DTypeBytes(dtype)), SafetensorsDTypeSize(SafetensorsDType(dtype)))
        << DTypeName(dtype);
  }
  EXPECT_EQ(DTypeBytes(DType::kF32), 4);
  EXPECT_EQ(DTypeBytes(DType::kBF16), 2);
  EXPECT_EQ(DTypeBytes(DType::kInt8), 1);
}

// Three tables of width 8; dense 3 + 2 through a bottom MLP ending at 8.
ModelSpec ThreeTables(Interaction interaction) {
  ModelSpec spec;
  spec.tables = {{"u", Side::kUser, 10, 8}, {"i", Side::kItem, 10, 8}, {"j", Side::kItem, 10, 8}};
  spec.dense_user = 3;
  spec.dense_item = 2;
  spec.bottom_mlp = {16, 8};
  spec.interaction = interaction;
  spec.top_mlp = {1};
  return spec;
}

TEST(ModelTypesTest, WidthsOfEachInteraction) {
  ModelSpec dot = ThreeTables(Interaction::kDot);
  EXPECT_EQ(dot.z_width(), 8);
  EXPECT_EQ(dot.concat_width(), 8 + 3 * 8);
  EXPECT_EQ(dot.dot_vectors(), 4);            // z, u, i, j
  EXPECT_EQ(dot.interaction_width(), 8 + 6);  // z, then 4 choose 2 dots
  for (Interaction concat : {Interaction::kConcat, Interaction::kLinear, Interaction::kDcn}) {
    EXPECT_EQ(ThreeTables(concat).interaction_width(), 32) << InteractionName(concat);
  }
  // Without dense features there is no z: the dot pairs the tables alone.
  dot.dense_user = dot.dense_item = 0;
  dot.bottom_mlp.clear();
  EXPECT_EQ(dot.z_width(), 0);
  EXPECT_EQ(dot.dot_vectors(), 3);
  EXPECT_EQ(dot.interaction_width(), 3);
  // Dense features without a bottom MLP: z is the dense input itself.
  ModelSpec raw = ThreeTables(Interaction::kConcat);
  raw.bottom_mlp.clear();
  EXPECT_EQ(raw.z_width(), 5);
  EXPECT_EQ(raw.concat_width(), 5 + 24);
}

}  // namespace
}  // namespace fuserank::engine
