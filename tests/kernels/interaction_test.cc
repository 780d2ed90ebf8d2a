// The interaction kernels against the CPU engine: the dot kernel against DotInteraction
// on the same vectors (z in h, user vectors per request, item vectors per candidate, in a
// mixed table order), and the concat copy of user vectors; dims 4, 12, 100 and 128, with
// and without z, 1 / 31 / 33 / 4096 candidates over several requests, and 100 vectors of
// 128 (a warp's staging past 48 KiB: the opt-in launch). h is poisoned first: z must be
// left as it was and nothing past the dots may be written.
#include "kernels/interaction.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_interaction.h"
#include "gtest/gtest.h"
#include "kernels/batch_layout.h"
#include "kernels/layout_math.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

// A packed batch holding only what the interaction kernels read: counts and
// candidate_begin of requests of the given sizes.
std::vector<unsigned char> PackedRequests(const std::vector<uint32_t>& sizes) {
  kernels::PackedCounts counts;
  counts.num_requests = static_cast<uint32_t>(sizes.size());
  for (uint32_t s : sizes) counts.num_candidates += s;
  kernels::PackedHeader h;
  EXPECT_TRUE(kernels::ComputePackedLayout(counts, &h));
  std::vector<unsigned char> buf(h.total_bytes, 0);
  std::memcpy(buf.data(), &h, sizeof(h));
  uint32_t* begin = kernels::MutableSection<uint32_t>(buf.data(), h.candidate_begin);
  begin[0] = 0;
  for (size_t r = 0; r < sizes.size(); ++r) begin[r + 1] = begin[r] + sizes[r];
  return buf;
}

std::vector<float> Random(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct DotCase {
  int dim;
  bool z;
  int tables = 6;
};

// `tables` slots, user and item mixed: user 0 at col 0, item 0, item 1 at col d, user 1 at
// col d, ... (every third a user table); *user_cols / *item_cols: vectors per side.
std::vector<kernels::DotSlot> DotSlots(int tables, int d, int* user_cols, int* item_cols) {
  std::vector<kernels::DotSlot> slots;
  *user_cols = 0;
  *item_cols = 0;
  for (int k = 0; k < tables; ++k) {
    const bool user = k % 3 == 0;
    int* cols = user ? user_cols : item_cols;
    slots.push_back({user ? 1 : 0, d * (*cols)++});
  }
  return slots;
}

// Dynamic shared memory the dot kernel may use per block on this device once it opts in
// (kernels::AllowDotSharedBytes), as CudaBackend::Create sets it for a wide model.
size_t OptInSharedBytes() {
  int device = 0;
  int optin = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
            cudaSuccess);
  return static_cast<size_t>(optin);
}

class DotKernelTest : public ::testing::TestWithParam<DotCase> {};

TEST_P(DotKernelTest, MatchesTheCpuDotInteraction) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const DotCase p = GetParam();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const int d = p.dim;
  int user_cols = 0;
  int item_cols = 0;
  const std::vector<kernels::DotSlot> slots = DotSlots(p.tables, d, &user_cols, &item_cols);
  const int tables = p.tables;
  const int user_ld = user_cols * d + 3;
  const int item_ld = item_cols * d + 1;
  const int z = p.z ? d : 0;
  const int n = tables + (p.z ? 1 : 0);
  const int pairs = static_cast<int>(kernels::NumPairs(n));
  const int h_ld = z + pairs + 5;
  // A warp's vectors past the default 48 KiB of shared memory per block: the kernel runs
  // with the device's opt-in limit, as the backend launches it for such a model, and the
  // launcher must refuse the same arguments without it.
  const size_t per_warp = kernels::DotSharedBytesPerWarp(n, d);
  const bool opt_in = per_warp > 48 * 1024;
  size_t max_shared_bytes = 48 * 1024;
  if (opt_in) {
    max_shared_bytes = OptInSharedBytes();
    ASSERT_GE(max_shared_bytes, per_warp) << "this GPU cannot hold one warp's vectors";
    ASSERT_EQ(kernels::AllowDotSharedBytes(max_shared_bytes), cudaSuccess);
  }
  // The wide case's CPU reference costs n^2 / 2 dots of d per candidate: fewer candidates.
  const std::vector<std::vector<uint32_t>> batches =
      opt_in ? std::vector<std::vector<uint32_t>>{{1}, {31}, {33}, {5, 0, 1, 40, 17}}
             : std::vector<std::vector<uint32_t>>{{1}, {31}, {33}, {4096}, {5, 0, 1, 40, 17}};
  for (const std::vector<uint32_t>& sizes : batches) {
    const std::vector<unsigned char> packed = PackedRequests(sizes);
    uint32_t candidates = 0;
    for (uint32_t s : sizes) candidates += s;
    const uint32_t requests = static_cast<uint32_t>(sizes.size());
    const std::vector<float> user = Random(size_t{requests} * user_ld, rng);
    const std::vector<float> item = Random(size_t{candidates} * item_ld, rng);
    std::vector<float> h(size_t{candidates} * h_ld);
    std::memset(h.data(), 0xFF, h.size() * sizeof(float));  // poison
    const std::vector<float> zs = Random(size_t{candidates} * d, rng);
    for (uint32_t c = 0; c < candidates; ++c) {
      for (int e = 0; e < z; ++e) h[size_t{c} * h_ld + e] = zs[size_t{c} * d + e];
    }
    // The CPU stage's input: per candidate the n vectors side by side.
    std::vector<float> v(size_t{candidates} * n * d);
    uint32_t c = 0;
    for (uint32_t r = 0; r < requests; ++r) {
      for (uint32_t i = 0; i < sizes[r]; ++i, ++c) {
        float* row = v.data() + size_t{c} * n * d;
        int k = 0;
        if (p.z) std::memcpy(row + d * k++, zs.data() + size_t{c} * d, d * sizeof(float));
        for (const kernels::DotSlot& s : slots) {
          const float* src = s.user ? user.data() + size_t{r} * user_ld + s.col
                                    : item.data() + size_t{c} * item_ld + s.col;
          std::memcpy(row + d * k++, src, d * sizeof(float));
        }
      }
    }
    std::vector<float> want(size_t{candidates} * pairs);
    DotInteraction(v.data(), static_cast<int>(candidates), n, d, n * d, want.data(), pairs);
    // The kernel's arithmetic, exactly: each dot one fmaf chain in element order from +0,
    // which is also the CPU engine's wherever it takes the matrix product
    // (engine/cpu/cpu_gram_dots.h; there the two agree bit for bit).
    std::vector<float> chain(size_t{candidates} * pairs);
    for (uint32_t cc = 0; cc < candidates; ++cc) {
      const float* vectors = v.data() + size_t{cc} * n * d;
      int q = 0;
      for (int i = 1; i < n; ++i) {
        for (int j = 0; j < i; ++j, ++q) {
          float sum = 0.0f;
          for (int e = 0; e < d; ++e) sum = std::fma(vectors[i * d + e], vectors[j * d + e], sum);
          chain[size_t{cc} * pairs + q] = sum;
        }
      }
    }

    DeviceBuffer d_batch = gpu_test::Upload(packed);
    DeviceBuffer d_slots = gpu_test::Upload(slots);
    DeviceBuffer d_user = gpu_test::Upload(user);
    DeviceBuffer d_item = gpu_test::Upload(item);
    DeviceBuffer d_h = gpu_test::Upload(h);
    kernels::DotArgs a;
    a.d_batch = d_batch.get<unsigned char>();
    a.d_slots = d_slots.get<kernels::DotSlot>();
    a.num_tables = tables;
    a.dim = d;
    a.d_user = d_user.get<float>();
    a.user_ld = user_ld;
    a.d_item = d_item.get<float>();
    a.item_ld = item_ld;
    a.d_h = d_h.get<float>();
    a.h_ld = h_ld;
    a.z_width = z;
    a.max_candidates = kernels::CandidateBucket(candidates);
    if (opt_in) {
      EXPECT_EQ(kernels::LaunchDotInteraction(a, nullptr), cudaErrorInvalidValue)
          << per_warp << " bytes per warp launched within the default 48 KiB";
      a.max_shared_bytes = max_shared_bytes;
    }
    ASSERT_EQ(kernels::LaunchDotInteraction(a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = gpu_test::Download<float>(d_h, h.size());
    for (uint32_t cc = 0; cc < candidates; ++cc) {
      const float* row = got.data() + size_t{cc} * h_ld;
      for (int e = 0; e < z; ++e) ASSERT_EQ(row[e], zs[size_t{cc} * d + e]) << "z changed";
      for (int q = 0; q < pairs; ++q) {
        const float w = want[size_t{cc} * pairs + q];
        ASSERT_NEAR(row[z + q], w, 1e-5 * std::max(1.0f, std::fabs(w)))
            << "candidate " << cc << " pair " << q;
        ASSERT_EQ(row[z + q], chain[size_t{cc} * pairs + q])
            << "candidate " << cc << " pair " << q << ": not the fmaf chain's value";
      }
      for (int e = z + pairs; e < h_ld; ++e) ASSERT_TRUE(gpu_test::IsPoison(row[e])) << e;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, DotKernelTest,
                         ::testing::Values(DotCase{4, true}, DotCase{12, false}, DotCase{100, true},
                                           DotCase{128, true}, DotCase{128, false},
                                           // z and 99 tables of 128: 51,600 bytes a warp,
                                           // past the default 48 KiB per block.
                                           DotCase{128, true, 99}),
                         [](const ::testing::TestParamInfo<DotCase>& info) {
                           return "dim" + std::to_string(info.param.dim) +
                                  (info.param.z ? "_z" : "_noz") +
                                  (info.param.tables == 6
                                       ? ""
                                       : "_tables" + std::to_string(info.param.tables));
                         });

TEST(ConcatUserKernelTest, CopiesEachRequestsUserVectorsIntoItsCandidates) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::vector<kernels::ConcatSlot> slots = {{0, 3, 4}, {4, 20, 100}, {104, 130, 12}};
  const int user_ld = 120;
  const int h_ld = 150;
  for (const std::vector<uint32_t>& sizes : {std::vector<uint32_t>{1}, {4096}, {7, 0, 33, 2}}) {
    const std::vector<unsigned char> packed = PackedRequests(sizes);
    uint32_t candidates = 0;
    for (uint32_t s : sizes) candidates += s;
    const std::vector<float> user = Random(sizes.size() * user_ld, rng);
    DeviceBuffer d_batch = gpu_test::Upload(packed);
    DeviceBuffer d_slots = gpu_test::Upload(slots);
    DeviceBuffer d_user = gpu_test::Upload(user);
    DeviceBuffer d_h = gpu_test::Poisoned(size_t{candidates} * h_ld * sizeof(float));
    kernels::ConcatUserArgs a;
    a.d_batch = d_batch.get<unsigned char>();
    a.d_slots = d_slots.get<kernels::ConcatSlot>();
    a.num_slots = static_cast<int>(slots.size());
    a.d_user = d_user.get<float>();
    a.user_ld = user_ld;
    a.d_h = d_h.get<float>();
    a.h_ld = h_ld;
    a.max_candidates = kernels::CandidateBucket(candidates);
    ASSERT_EQ(kernels::LaunchConcatUser(a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = gpu_test::Download<float>(d_h, size_t{candidates} * h_ld);
    uint32_t c = 0;
    for (size_t r = 0; r < sizes.size(); ++r) {
      for (uint32_t i = 0; i < sizes[r]; ++i, ++c) {
        std::vector<bool> owned(h_ld, false);
        for (const kernels::ConcatSlot& s : slots) {
          for (int e = 0; e < s.dim; ++e) {
            owned[s.h_col + e] = true;
            ASSERT_EQ(got[size_t{c} * h_ld + s.h_col + e], user[r * user_ld + s.user_col + e]);
          }
        }
        for (int e = 0; e < h_ld; ++e) {
          if (!owned[e]) {
            ASSERT_TRUE(gpu_test::IsPoison(got[size_t{c} * h_ld + e])) << e;
          }
        }
      }
    }
  }
}

TEST(InteractionLaunchTest, NothingToDoReturnsAtOnce) {
  kernels::DotArgs dot;  // max_candidates == 0
  EXPECT_EQ(kernels::LaunchDotInteraction(dot, nullptr), cudaSuccess);
  dot.max_candidates = 16;
  dot.num_tables = 1;  // one vector: no pairs
  EXPECT_EQ(kernels::LaunchDotInteraction(dot, nullptr), cudaSuccess);
  kernels::ConcatUserArgs concat;
  EXPECT_EQ(kernels::LaunchConcatUser(concat, nullptr), cudaSuccess);
}

// A warp whose vectors do not fit DotArgs::max_shared_bytes is refused before any launch
// (no device needed): the 48 KiB default unless the kernel opted in to more.
TEST(InteractionLaunchTest, AWarpPastItsSharedBudgetIsRefusedBeforeTheLaunch) {
  const unsigned char batch = 0;
  const kernels::DotSlot slot;
  float h = 0.0f;
  kernels::DotArgs dot;
  dot.d_batch = &batch;  // never read: the launcher refuses first
  dot.d_slots = &slot;
  dot.d_h = &h;
  dot.num_tables = 99;
  dot.dim = 128;
  dot.z_width = 128;
  dot.max_candidates = 16;
  ASSERT_GT(kernels::DotSharedBytesPerWarp(100, 128), size_t{48 * 1024});
  EXPECT_EQ(kernels::LaunchDotInteraction(dot, nullptr), cudaErrorInvalidValue);
  dot.max_shared_bytes = kernels::DotSharedBytesPerWarp(100, 128) - 1;
  EXPECT_EQ(kernels::LaunchDotInteraction(dot, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace fuserank::engine::cuda
