// The segmented top-K kernel against the CPU engine's SaturateNonFinite + Sigmoid + TopK,
// request by request, on seeded random logits (continuous, from a small set so that many
// scores tie, and with NaN and +-Inf among them):
// segment sizes around every block shape's capacity, K of 1, about half, and all, one
// and several requests per batch; every block shape that holds the batch must agree.
// Requests longer than kMaxTopKSegment are left to the host: their outputs stay poisoned.
#include "engine/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_mlp.h"
#include "gtest/gtest.h"
#include "kernels/batch_layout.h"
#include "kernels/layout_math.h"
#include "kernels/topk.h"
#include "kernels/topk_keys.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

struct Segments {
  std::vector<uint32_t> sizes;
  bool ties;
  // About one logit in five is NaN (both signs) or +-Inf: the kernel saturates them as the
  // CPU engine does (NaN -> 0, +-Inf -> +-FLT_MAX) before the sigmoid; no score is NaN.
  bool nans = false;
};

class TopKKernelTest : public ::testing::TestWithParam<Segments> {};

TEST_P(TopKKernelTest, MatchesTheCpuTopK) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const Segments p = GetParam();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const uint32_t requests = static_cast<uint32_t>(p.sizes.size());
  kernels::PackedCounts counts;
  counts.num_requests = requests;
  for (uint32_t s : p.sizes) counts.num_candidates += s;
  kernels::PackedHeader h;
  ASSERT_TRUE(kernels::ComputePackedLayout(counts, &h));
  std::vector<uint32_t> begin{0}, top_k, result_begin{0};
  uint32_t max_segment = 0;
  for (uint32_t s : p.sizes) {
    begin.push_back(begin.back() + s);
    const uint32_t choices[] = {1, s / 2 + 1, s};
    top_k.push_back(std::min(s, choices[rng() % 3]));
    result_begin.push_back(result_begin.back() + top_k.back());
    max_segment = std::max(max_segment, s);
  }
  h.total_results = result_begin.back();
  h.max_segment = max_segment;
  std::vector<unsigned char> packed(h.total_bytes);
  std::memcpy(packed.data(), &h, sizeof(h));
  std::memcpy(packed.data() + h.candidate_begin, begin.data(), begin.size() * 4);
  std::memcpy(packed.data() + h.top_k, top_k.data(), top_k.size() * 4);
  std::memcpy(packed.data() + h.result_begin, result_begin.data(), result_begin.size() * 4);

  std::vector<float> logits(counts.num_candidates);
  std::uniform_real_distribution<float> u(-12.0f, 12.0f);
  for (float& x : logits) x = p.ties ? static_cast<float>(static_cast<int>(rng() % 7) - 3) : u(rng);
  if (p.nans) {
    const float specials[] = {
        std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
    for (float& x : logits) {
      if (rng() % 5 == 0) x = specials[rng() % 4];
    }
  }
  // The CPU engine's logits are saturated (SaturateNonFinite after every layer).
  std::vector<float> saturated = logits;
  SaturateNonFinite(saturated.data(), 1, static_cast<int>(saturated.size()),
                    static_cast<int>(saturated.size()));
  std::vector<float> scores(logits.size());
  Sigmoid(saturated.data(), static_cast<int>(saturated.size()), 1, scores.data());

  DeviceBuffer d_batch = gpu_test::Upload(packed);
  DeviceBuffer d_logits = gpu_test::Upload(logits);
  const uint32_t total = std::max<uint32_t>(h.total_results, 1);
  for (int shape = kernels::TopKShapeIndex(max_segment); shape < kernels::kNumTopKShapes; ++shape) {
    SCOPED_TRACE(::testing::Message() << "block shape " << shape);
    DeviceBuffer d_out = gpu_test::Poisoned(total * sizeof(kernels::ScoredPair));
    kernels::TopKArgs a;
    a.d_batch = d_batch.get<unsigned char>();
    a.d_logits = d_logits.get<float>();
    a.d_out = d_out.get<kernels::ScoredPair>();
    a.shape = shape;
    a.max_requests = kernels::CandidateBucket(std::max(counts.num_candidates, requests));
    ASSERT_EQ(kernels::LaunchSegmentedTopK(a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = gpu_test::Download<ScoredIndex>(d_out, total);
    for (uint32_t r = 0; r < requests; ++r) {
      const uint32_t n = p.sizes[r];
      const uint32_t k = top_k[r];
      const ScoredIndex* g = got.data() + result_begin[r];
      if (n > kernels::kMaxTopKSegment) {
        for (uint32_t i = 0; i < k; ++i) {
          EXPECT_TRUE(gpu_test::IsPoison(g[i].score)) << "long request written on the GPU";
        }
        continue;
      }
      std::vector<ScoredIndex> want(k);
      TopK(scores.data() + begin[r], static_cast<int>(n), static_cast<int>(k), want.data());
      for (uint32_t i = 0; i < k; ++i) ASSERT_FALSE(std::isnan(g[i].score)) << "rank " << i;
      const std::vector<float> score_of(scores.begin() + begin[r], scores.begin() + begin[r + 1]);
      gpu_test::ExpectSameTopK(g, want.data(), k, score_of, 1e-6, "request " + std::to_string(r));
      if (p.ties) {  // equal logits give equal scores on both sides: exact order
        for (uint32_t i = 0; i < k; ++i) ASSERT_EQ(g[i].index, want[i].index) << i;
      }
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, TopKKernelTest,
    ::testing::Values(Segments{{1}, false}, Segments{{1}, true}, Segments{{31, 32, 33}, false},
                      Segments{{63, 64, 65}, true}, Segments{{127, 128, 129}, true},
                      Segments{{255, 256, 257}, false}, Segments{{1023, 1024, 1025}, true},
                      Segments{{511, 512, 513}, false}, Segments{{2047, 2048, 2049}, true},
                      Segments{{4095}, false}, Segments{{4096}, true}, Segments{{4096}, false},
                      Segments{{3, 0, 17, 250, 1, 64}, false}, Segments{{5000, 3, 129}, true},
                      Segments{{1, 2, 100, 129}, true, true}, Segments{{4096, 700}, true, true}),
    [](const ::testing::TestParamInfo<Segments>& info) {
      std::string name;
      for (uint32_t s : info.param.sizes) name += std::to_string(s) + "_";
      return name + (info.param.ties ? "ties" : "continuous") + (info.param.nans ? "_nans" : "");
    });

TEST(TopKLaunchTest, NoRequestsReturnsAtOnce) {
  kernels::TopKArgs a;  // max_requests == 0
  EXPECT_EQ(kernels::LaunchSegmentedTopK(a, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace fuserank::engine::cuda
