// The GPU's mean pooling of a bag whose weights cancel exactly, emulated on the host from
// the packed batch (tests/engine/gpu_emulation_util.h: the kernels' float arithmetic): the
// zero vector, as on the CPU engine and in the double reference (SPEC section 2).
#include <vector>

#include "engine/cuda/batch_packer.h"
#include "engine/cuda/gpu_layout.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/gpu_emulation_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

using emulation::DeviceTables;
using emulation::Emulated;
using emulation::EmulateGpu;
using emulation::ExpectPooledLikeTheCpuEngine;
using emulation::Fixture;
using emulation::MakeCaseFixture;

// A mean-pooled bag whose weights cancel exactly, {1, 2^-24, -1, -2^-24}, in a user and
// an item table: the kernels add weights in float (here -2^-24), so the packer zeroes such
// a bag's weights and the pooled vector is the zero vector (SPEC section 2), as on the CPU
// engine and in the double reference, not the bag divided by -2^-24.
TEST(GpuEmulationMeanTest, WeightsThatCancelPoolToTheZeroVectorAsOnTheCpu) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  ModelSpec spec = fuserank::testing::SmallSpec(1, 2, 40, 8);
  spec.tables[0].pooling = Pooling::kMean;  // user_0
  spec.tables[1].pooling = Pooling::kMean;  // item_0
  Fixture f = MakeCaseFixture(spec, seed, {3, 2});
  ASSERT_NE(f.model, nullptr);
  const float tiny = 1.0f / (1 << 24);
  const test::RefBag cancelling{{3, 7, 11, 19}, {1.0f, tiny, -1.0f, -tiny}};
  f.requests[0].user_bags[0] = cancelling;
  f.requests[1].candidates[1].bags[0] = cancelling;
  f.requests[0].candidates[2].bags[0] = cancelling;
  f.batch = test::MakeBatch(f.model, f.requests);
  auto layout = ComputeGpuLayout(*f.model);
  ASSERT_TRUE(layout.ok()) << layout.status();
  BatchPacker packer(MakePackInfo(*f.model), false);
  auto h = packer.Plan(f.batch);
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<unsigned char> buf(h->total_bytes);
  packer.Write(f.batch, *h, buf.data());
  const Emulated em = EmulateGpu(*f.model, *layout, buf, DeviceTables(*f.model, *layout), nullptr);
  ASSERT_NO_FATAL_FAILURE(ExpectPooledLikeTheCpuEngine(*f.model, *layout, f.batch, em));
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(em.user[layout->lookup[0].out_col + e], 0.0f) << "user_0 of request 0, col " << e;
  }
  int c = 0;
  for (size_t r = 0; r < f.requests.size(); ++r) {
    for (size_t i = 0; i < f.requests[r].candidates.size(); ++i, ++c) {
      const double want = test::ReferenceScore(f.test_model, f.requests[r], static_cast<int>(i));
      EXPECT_NEAR(em.scores[c], want, 1e-5) << "request " << r << " candidate " << i;
    }
  }
}

}  // namespace
}  // namespace fuserank::engine::cuda
