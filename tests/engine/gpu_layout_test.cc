// The GpuLayout of a model, tested without a GPU: the columns and pitches of the dot and
// dcn interactions (gpu_emulation_test.cc checks them end to end). The host-side pieces
// around it: layout_math_test.cc, topk_keys_test.cc, batch_packer_test.cc.
#include "engine/cuda/gpu_layout.h"

#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine::cuda {
namespace {

using Fixture = test::BatchFixture;
constexpr auto MakeFixture = test::MakeBatchFixture;

TEST(GpuLayoutTest, DotColumnsFollowTheSpec) {
  Fixture f = MakeFixture(fuserank::testing::SmallSpec(2, 3, 10, 8), 3, {1});
  ASSERT_NE(f.model, nullptr);
  auto g = ComputeGpuLayout(*f.model);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->z_width, 8);
  EXPECT_EQ(g->h_width, 8 + 15);  // z + 6 * 5 / 2 dots
  EXPECT_EQ(g->h_ld, 24);
  EXPECT_EQ(g->x_ld, 8);  // 5 dense floats, padded to 16 bytes
  EXPECT_EQ(g->user_ld, 16);
  EXPECT_EQ(g->item_ld, 24);
  EXPECT_EQ(g->lanes, 4);  // 32-byte rows: 2 vectors
  ASSERT_EQ(g->dot_slots.size(), 5u);
  EXPECT_EQ(g->dot_slots[0].user, 1);
  EXPECT_EQ(g->dot_slots[1].col, 8);
  EXPECT_EQ(g->dot_slots[2].user, 0);
  EXPECT_EQ(g->dot_slots[4].col, 16);
  ASSERT_EQ(g->lookup.size(), 5u);
  EXPECT_EQ(g->lookup[2].out_col, 0);  // first item table
  EXPECT_EQ(g->lookup[0].vector, 1);
}

// dcn lays h out as concat does (h = x0 = concat(V), item vectors at their spec columns)
// and adds the cross layers' shape.
TEST(GpuLayoutTest, DcnColumnsAreConcatsPlusTheCrossShape) {
  ModelSpec spec = fuserank::testing::SmallSpec(2, 3, 10, 8);
  spec.interaction = Interaction::kDcn;
  spec.dcn = {3, 5};
  Fixture f = MakeFixture(spec, 3, {1});
  ASSERT_NE(f.model, nullptr);
  auto g = ComputeGpuLayout(*f.model);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->h_width, 8 + 5 * 8);  // concat(V): z, then the five tables
  EXPECT_EQ(g->h_ld, 48);
  EXPECT_EQ(g->dcn_layers, 3);
  EXPECT_EQ(g->dcn_rank, 5);
  EXPECT_EQ(g->dcn_t_ld, 8);
  EXPECT_TRUE(g->dot_slots.empty());
  ASSERT_EQ(g->concat_slots.size(), 2u);       // the user vectors, copied into every row
  EXPECT_EQ(g->lookup[2].out_col, 8 + 2 * 8);  // item_0 follows z and the two user tables
}

}  // namespace
}  // namespace fuserank::engine::cuda
