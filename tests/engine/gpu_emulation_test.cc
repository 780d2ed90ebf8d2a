// The CUDA backend's data path emulated on the host, from the packed batch, the GpuLayout
// and the device rows alone (the addresses the kernels read and write, the id-reorder
// gather into slots, the int8 decode of kernels/int8_rows.h; not their thread mapping),
// against the independent double reference: catches a wrong column, pitch, slot, section
// or row offset without a GPU. Dot / concat / linear, fp32 / fp16 / bf16 / int8, dims 4 to
// 128, with and without a bottom MLP, id reorder on and off. The pooled blocks are also
// checked against the CPU engine's PooledLookup (int8 on its AVX2+FMA path: bit for bit)
// and, for int8, the scores against the CPU engine's. (Mean bags whose weights cancel:
// gpu_emulation_mean_test.cc; the emulation itself: gpu_emulation_util.h.)
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/gpu_layout.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
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
using emulation::Gather;
using emulation::MakeCaseFixture;

struct EmulationCase {
  Interaction interaction;
  DType dtype;
  int dim;
  bool bottom;
  bool reorder;
};

class GpuEmulationTest : public ::testing::TestWithParam<EmulationCase> {};

TEST_P(GpuEmulationTest, PackedBatchAndLayoutGiveTheReferenceScores) {
  const EmulationCase p = GetParam();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  ModelSpec spec = fuserank::testing::SmallSpec(2, 3, 40, p.dim);
  std::swap(spec.tables[1], spec.tables[3]);  // interleave user and item tables
  spec.tables[2].pooling = Pooling::kMean;
  spec.embedding_dtype = p.dtype;
  spec.interaction = p.interaction;
  if (p.interaction == Interaction::kLinear) spec.cross_dim = 6;
  if (!p.bottom) {
    spec.bottom_mlp.clear();
    if (p.interaction == Interaction::kDot) {
      spec.dense_user = p.dim / 2;
      spec.dense_item = p.dim - p.dim / 2;
    }
  }
  spec.top_mlp = {fuserank::testing::TopInputWidth(spec) > 0 ? 16 : 1, 1};
  Fixture f = MakeCaseFixture(spec, seed, {1, 7, 0, 12});
  ASSERT_NE(f.model, nullptr);
  auto layout = ComputeGpuLayout(*f.model);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->row_type, RowTypeOf(p.dtype));
  BatchPacker packer(MakePackInfo(*f.model), p.reorder);
  auto h = packer.Plan(f.batch);
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<unsigned char> buf(h->total_bytes);
  packer.Write(f.batch, *h, buf.data());
  const std::vector<std::vector<std::byte>> tables = DeviceTables(*f.model, *layout);
  std::vector<std::byte> gathered;
  if (p.reorder) gathered = Gather(tables, *layout, buf.data(), *h);
  const Emulated em = EmulateGpu(*f.model, *layout, buf, tables, p.reorder ? &gathered : nullptr);
  ASSERT_NO_FATAL_FAILURE(ExpectPooledLikeTheCpuEngine(*f.model, *layout, f.batch, em));
  int c = 0;
  for (size_t r = 0; r < f.requests.size(); ++r) {
    for (size_t i = 0; i < f.requests[r].candidates.size(); ++i, ++c) {
      const double want = test::ReferenceScore(f.test_model, f.requests[r], static_cast<int>(i));
      EXPECT_NEAR(em.scores[c], want, 1e-5) << "request " << r << " candidate " << i;
    }
  }
  if (p.dtype != DType::kInt8) return;
  // The CPU engine's int8 scores of the same batch, every candidate.
  Batch all = f.batch;
  for (int r = 0; r < all.num_requests(); ++r) {
    all.top_k[r] = all.candidate_begin[r + 1] - all.candidate_begin[r];
  }
  std::unique_ptr<Backend> cpu = CreateCpuBackend(f.model, BackendOptions{});
  BatchResult result;
  const std::vector<std::vector<float>> cpu_scores = test::ScoresByIndex(*cpu, 0, all, result);
  c = 0;
  for (size_t r = 0; r < cpu_scores.size(); ++r) {
    for (size_t i = 0; i < cpu_scores[r].size(); ++i, ++c) {
      EXPECT_NEAR(em.scores[c], cpu_scores[r][i], 1e-5) << "CPU engine, request " << r << " " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GpuEmulationTest,
    ::testing::Values(EmulationCase{Interaction::kDot, DType::kF32, 8, true, false},
                      EmulationCase{Interaction::kDot, DType::kBF16, 4, false, false},
                      EmulationCase{Interaction::kDot, DType::kF16, 12, true, true},
                      EmulationCase{Interaction::kConcat, DType::kF32, 12, true, false},
                      EmulationCase{Interaction::kConcat, DType::kF16, 100, false, true},
                      EmulationCase{Interaction::kLinear, DType::kF32, 4, true, false},
                      EmulationCase{Interaction::kLinear, DType::kBF16, 128, false, false},
                      // int8: dims 16 and 128 take the kernel's vector path, 4/12/100 the
                      // element path; the reorder cases gather codes with scale and bias.
                      EmulationCase{Interaction::kDot, DType::kInt8, 16, true, false},
                      EmulationCase{Interaction::kDot, DType::kInt8, 12, false, true},
                      EmulationCase{Interaction::kConcat, DType::kInt8, 128, false, true},
                      EmulationCase{Interaction::kConcat, DType::kInt8, 4, true, false},
                      EmulationCase{Interaction::kLinear, DType::kInt8, 100, true, true}),
    [](const ::testing::TestParamInfo<EmulationCase>& info) {
      const EmulationCase& p = info.param;
      return std::string(InteractionName(p.interaction)) + "_" + std::string(DTypeName(p.dtype)) +
             "_dim" + std::to_string(p.dim) + (p.bottom ? "_bottom" : "_nobottom") +
             (p.reorder ? "_reorder" : "");
    });

}  // namespace
}  // namespace fuserank::engine::cuda
