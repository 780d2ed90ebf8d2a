// The CUDA backend's host-side logic, tested without a GPU: bucket and lane arithmetic,
// the top-K sort keys, the packed batch layout and packer (plain and id-reorder), and
// the GpuLayout columns (gpu_emulation_test.cc checks them end to end).
#include "engine/cuda/gpu_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/batch_validation.h"
#include "engine/cpu/cpu_mlp.h"
#include "engine/cuda/batch_packer.h"
#include "engine/topk.h"
#include "gtest/gtest.h"
#include "kernels/batch_layout.h"
#include "kernels/layout_math.h"
#include "kernels/topk_keys.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

using kernels::PackedHeader;
using kernels::Section;

TEST(GpuLayoutMathTest, BucketsArePowersOfTwoFromTheMinimum) {
  EXPECT_EQ(kernels::CandidateBucket(0), 16u);
  EXPECT_EQ(kernels::CandidateBucket(1), 16u);
  EXPECT_EQ(kernels::CandidateBucket(16), 16u);
  EXPECT_EQ(kernels::CandidateBucket(17), 32u);
  EXPECT_EQ(kernels::CandidateBucket(4096), 4096u);
  EXPECT_EQ(kernels::CandidateBucket(4097), 8192u);
  EXPECT_EQ(kernels::BucketIndex(16), 0);
  EXPECT_EQ(kernels::BucketIndex(32), 1);
  EXPECT_EQ(kernels::BucketIndex(8192), 9);
  for (uint32_t n = 1; n < 70000; n += 37) {
    const uint32_t b = kernels::CandidateBucket(n);
    EXPECT_GE(b, n);
    EXPECT_EQ(b & (b - 1), 0u) << n;
    EXPECT_TRUE(b == 16 || b / 2 < n) << n;
  }
}

TEST(GpuLayoutMathTest, LanesCoverTheWidestRow) {
  EXPECT_TRUE(kernels::UseVectorLoads(4, 4));    // 16 B: one vector
  EXPECT_TRUE(kernels::UseVectorLoads(12, 4));   // 48 B
  EXPECT_TRUE(kernels::UseVectorLoads(100, 4));  // 400 B
  EXPECT_FALSE(kernels::UseVectorLoads(12, 2));  // 24 B
  EXPECT_FALSE(kernels::UseVectorLoads(4, 2));   // 8 B
  EXPECT_TRUE(kernels::UseVectorLoads(128, 2));  // 256 B
  EXPECT_EQ(kernels::RowUnits(32, 4), 8);
  EXPECT_EQ(kernels::RowUnits(100, 4), 25);
  EXPECT_EQ(kernels::RowUnits(12, 2), 12);  // element by element
  EXPECT_EQ(kernels::LookupLanes(1), 4);
  EXPECT_EQ(kernels::LookupLanes(8), 8);  // dim 32 fp32: 4 bags per warp
  EXPECT_EQ(kernels::LookupLanes(25), 32);
  EXPECT_EQ(kernels::LookupLanes(100), 32);  // wider rows loop inside the group
}

TEST(GpuLayoutMathTest, RequestOfCandidateMatchesALinearScan) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<uint32_t> begin{0};
    const int requests = 1 + static_cast<int>(rng() % 40);
    for (int r = 0; r < requests; ++r) begin.push_back(begin.back() + rng() % 5);  // empty too
    for (uint32_t c = 0; c < begin.back(); ++c) {
      uint32_t expected = 0;
      for (int r = 0; r < requests; ++r) {
        if (begin[r] <= c && c < begin[r + 1]) expected = r;
      }
      ASSERT_EQ(kernels::RequestOfCandidate(begin.data(), requests, c), expected) << c;
    }
  }
}

TEST(GpuLayoutMathTest, PairsFollowTheSpecOrder) {
  for (uint32_t n : {0u, 1u, 2u, 3u, 27u, 200u}) {
    uint32_t p = 0;
    for (uint32_t i = 1; i < n; ++i) {
      for (uint32_t j = 0; j < i; ++j, ++p) {
        uint32_t pi, pj;
        kernels::PairFromIndex(p, &pi, &pj);
        ASSERT_EQ(pi, i) << p;
        ASSERT_EQ(pj, j) << p;
      }
    }
    EXPECT_EQ(kernels::NumPairs(n), p);
  }
  // A lane's walk with stride 32 visits exactly pairs lane, lane + 32, ...
  for (uint32_t lane = 0; lane < 32; ++lane) {
    uint32_t i, j;
    kernels::PairFromIndex(lane, &i, &j);
    for (uint32_t p = lane; p < kernels::NumPairs(60); p += 32) {
      uint32_t ei, ej;
      kernels::PairFromIndex(p, &ei, &ej);
      ASSERT_EQ(i, ei);
      ASSERT_EQ(j, ej);
      kernels::AdvancePair(32, &i, &j);
    }
  }
}

TEST(TopKKeysTest, KeysOrderScoresDescendingAndInvertExactly) {
  const float specials[] = {0.0f,
                            1.0f,
                            0.5f,
                            1e-30f,
                            1e-45f,
                            0.9999999f,
                            3.0f,
                            -2.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  std::vector<float> values(std::begin(specials), std::end(specials));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-20.0f, 20.0f);
  for (int i = 0; i < 2000; ++i) values.push_back(u(rng));
  for (float a : values) {
    const float back = kernels::ScoreFromDescendingKey(kernels::DescendingKey(a));
    ASSERT_EQ(std::memcmp(&a, &back, sizeof(a)), 0) << a;
    EXPECT_LT(kernels::DescendingKey(a), kernels::kPaddingKey) << a;
    for (float b : specials) {
      ASSERT_EQ(a > b, kernels::DescendingKey(a) < kernels::DescendingKey(b)) << a << " " << b;
      ASSERT_EQ(a == b, kernels::DescendingKey(a) == kernels::DescendingKey(b)) << a << " " << b;
    }
  }
}

// The GPU top-K is a stable ascending sort of (DescendingKey(sigmoid(logit)), index);
// on the host that must give exactly the CPU engine's TopK order, ties included.
TEST(TopKKeysTest, StableKeySortIsTheEngineTopK) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int n : {1, 2, 16, 129, 4096}) {
    std::vector<float> scores(n);
    for (float& s : scores) {
      // Few distinct logits (many ties), logits that saturate the sigmoid, and NaNs of
      // both signs (which rank last, by index).
      const int pick = static_cast<int>(rng() % 11);
      const float logit = pick < 9    ? static_cast<float>(pick - 4) * 7.0f
                          : pick == 9 ? std::numeric_limits<float>::quiet_NaN()
                                      : -std::numeric_limits<float>::quiet_NaN();
      s = kernels::Sigmoid(logit);
    }
    std::vector<std::pair<uint32_t, uint32_t>> keyed(n);
    for (int i = 0; i < n; ++i) keyed[i] = {kernels::DescendingKey(scores[i]), i};
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const int k = std::max(1, n / 3);
    std::vector<ScoredIndex> expected(k);
    TopK(scores.data(), n, k, expected.data());
    for (int i = 0; i < k; ++i) {
      ASSERT_EQ(keyed[i].second, expected[i].index) << "n " << n << " rank " << i;
      const float back = kernels::ScoreFromDescendingKey(keyed[i].first);
      if (std::isnan(expected[i].score)) {
        ASSERT_TRUE(std::isnan(back)) << "n " << n << " rank " << i;
      } else {
        ASSERT_EQ(back, expected[i].score);
      }
    }
  }
}

TEST(TopKKeysTest, EveryNanSortsAfterEveryNumberAndBeforePadding) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::signaling_NaN(),
                        kernels::BitsToFloat(0x7F800001u), kernels::BitsToFloat(0xFFFFFFFFu)};
  for (float nan : nans) {
    const uint32_t key = kernels::DescendingKey(nan);
    EXPECT_EQ(key, kernels::kNanKey) << kernels::FloatBits(nan);
    EXPECT_LT(key, kernels::kPaddingKey);
    for (float number : {-inf, -1.0f, -0.0f, 0.0f, 0.5f, 1.0f, inf}) {
      EXPECT_GT(key, kernels::DescendingKey(number)) << number;
    }
    EXPECT_TRUE(std::isnan(kernels::ScoreFromDescendingKey(key)));
  }
}

// The GPU saturates where its kernels write exactly as the CPU engine's stages do, and a
// logit's score is never NaN.
TEST(TopKKeysTest, SaturationAndScoresMatchTheCpuEngine) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values = {0.0f, -0.0f, 1.5f, -2.0f, 3.0e38f, -3.0e38f, inf, -inf, nan, -nan};
  std::vector<float> cpu = values;
  SaturateNonFinite(cpu.data(), 1, static_cast<int>(cpu.size()), static_cast<int>(cpu.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const float gpu = kernels::SaturateFinite(values[i]);
    EXPECT_EQ(std::memcmp(&gpu, &cpu[i], sizeof(float)), 0) << values[i];
    const float score = kernels::ScoreOfLogit(values[i]);
    EXPECT_FALSE(std::isnan(score)) << values[i];
    EXPECT_GE(score, 0.0f);
    EXPECT_LE(score, 1.0f);
  }
  EXPECT_EQ(kernels::ScoreOfLogit(inf), 1.0f);
  EXPECT_EQ(kernels::ScoreOfLogit(-inf), 0.0f);
  EXPECT_EQ(kernels::ScoreOfLogit(nan), 0.5f);
  EXPECT_EQ(kernels::ScoreOfLogit(1.25f), kernels::Sigmoid(1.25f));
}

TEST(TopKKeysTest, ShapeHoldsTheLongestRequest) {
  EXPECT_EQ(kernels::TopKShapeIndex(1), 0);
  EXPECT_EQ(kernels::TopKShapeIndex(32), 0);
  EXPECT_EQ(kernels::TopKShapeIndex(33), 1);
  EXPECT_EQ(kernels::TopKShapeIndex(128), 2);
  EXPECT_EQ(kernels::TopKShapeIndex(129), 3);
  EXPECT_EQ(kernels::TopKShapeIndex(1024), 5);  // 1024 candidates sort 1024 keys, not 2048
  EXPECT_EQ(kernels::TopKShapeIndex(1025), 6);
  EXPECT_EQ(kernels::TopKShapeIndex(4096), 7);
  EXPECT_EQ(kernels::TopKShapeIndex(5000), 7);  // over kMaxTopKSegment: ranked on the host
  // One shape per power of two: each holds twice the one before, the last kMaxTopKSegment.
  EXPECT_EQ(kernels::kTopKShapes[0].capacity(), 32);
  for (int s = 1; s < kernels::kNumTopKShapes; ++s) {
    EXPECT_EQ(kernels::kTopKShapes[s].capacity(), 2 * kernels::kTopKShapes[s - 1].capacity()) << s;
    EXPECT_EQ(kernels::kTopKShapes[s].threads % 32, 0) << "whole warps (coalesced loads)";
  }
  EXPECT_EQ(kernels::kTopKShapes[kernels::kNumTopKShapes - 1].capacity(),
            static_cast<int>(kernels::kMaxTopKSegment));
}

TEST(PackedLayoutTest, SectionsAreAlignedOrderedAndDisjoint) {
  kernels::PackedCounts c;
  c.num_requests = 3;
  c.num_candidates = 17;
  c.user_tables = 2;
  c.item_tables = 5;
  c.num_user_ids = 7;
  c.num_item_ids = 101;
  c.dense_user = 3;
  c.dense_item = 13;
  for (bool weights : {false, true}) {
    c.has_weights = weights;
    PackedHeader h;
    ASSERT_TRUE(kernels::ComputePackedLayout(c, &h));
    const std::vector<std::pair<uint32_t, uint64_t>> sections = {
        {h.candidate_begin, 4 * 4},
        {h.top_k, 3 * 4},
        {h.result_begin, 4 * 4},
        {h.user_bag_begin, 7 * 4},
        {h.user_rows, 7 * 4},
        {h.user_weights, weights ? 7 * 4 : 0},
        {h.item_bag_begin, 86 * 4},
        {h.item_rows, 101 * 4},
        {h.item_weights, weights ? 404 : 0},
        {h.user_dense, 9 * 4},
        {h.item_dense, 17 * 13 * 4},
        {h.unique_rows, 0}};
    uint64_t end = sizeof(PackedHeader);
    for (const auto& [offset, bytes] : sections) {
      EXPECT_EQ(offset % kernels::kSectionAlign, 0u);
      EXPECT_GE(offset, end);
      end = offset + bytes;
    }
    EXPECT_GE(h.total_bytes, end);
    EXPECT_LT(h.total_bytes, end + kernels::kSectionAlign);
    EXPECT_EQ(h.num_user_bags, 6u);
    EXPECT_EQ(h.num_item_bags, 85u);
  }
}

using Fixture = test::BatchFixture;
constexpr auto MakeFixture = test::MakeBatchFixture;

template <typename T>
std::vector<T> Read(const std::vector<unsigned char>& buf, uint32_t offset, size_t n) {
  std::vector<T> v(n);
  if (n > 0) std::memcpy(v.data(), buf.data() + offset, n * sizeof(T));
  return v;
}

TEST(BatchPackerTest, WritesEverySectionOfTheBatch) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  Fixture f = MakeFixture(fuserank::testing::SmallSpec(2, 3, 50, 8), seed, {5, 0, 1, 9});
  ASSERT_NE(f.model, nullptr);
  BatchPacker packer(MakePackInfo(*f.model), /*reorder_ids=*/false);
  auto planned = packer.Plan(f.batch);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const PackedHeader& h = *planned;
  std::vector<unsigned char> buf(h.total_bytes, 0xAB);
  packer.Write(f.batch, h, buf.data());
  PackedHeader read;
  std::memcpy(&read, buf.data(), sizeof(read));
  EXPECT_EQ(std::memcmp(&read, &h, sizeof(h)), 0);
  const Batch& b = f.batch;
  EXPECT_EQ(h.num_requests, 4u);
  EXPECT_EQ(h.num_candidates, 15u);
  EXPECT_EQ(h.max_segment, 9u);
  EXPECT_EQ(Read<uint32_t>(buf, h.candidate_begin, 5), b.candidate_begin);
  EXPECT_EQ(Read<uint32_t>(buf, h.user_bag_begin, b.user.bag_begin.size()), b.user.bag_begin);
  EXPECT_EQ(Read<int32_t>(buf, h.user_rows, b.user.rows.size()), b.user.rows);
  EXPECT_EQ(Read<uint32_t>(buf, h.item_bag_begin, b.item.bag_begin.size()), b.item.bag_begin);
  EXPECT_EQ(Read<int32_t>(buf, h.item_rows, b.item.rows.size()), b.item.rows);
  EXPECT_EQ(Read<float>(buf, h.user_dense, b.user_dense.size()), b.user_dense);
  EXPECT_EQ(Read<float>(buf, h.item_dense, b.item_dense.size()), b.item_dense);
  if (h.has_weights) {
    EXPECT_EQ(Read<float>(buf, h.user_weights, b.user.weights.size()), b.user.weights);
    EXPECT_EQ(Read<float>(buf, h.item_weights, b.item.weights.size()), b.item.weights);
  }
  const auto top_k = Read<uint32_t>(buf, h.top_k, 4);
  const auto result_begin = Read<uint32_t>(buf, h.result_begin, 5);
  uint32_t total = 0;
  for (int r = 0; r < 4; ++r) {
    const uint32_t count = b.candidate_begin[r + 1] - b.candidate_begin[r];
    EXPECT_EQ(top_k[r], std::min(b.top_k[r], count));
    EXPECT_EQ(result_begin[r], total);
    total += top_k[r];
  }
  EXPECT_EQ(h.total_results, total);
  EXPECT_EQ(packer.result_begin(), result_begin);
}

TEST(BatchPackerTest, WeightsAreLeftOutWhenAllAreOne) {
  Fixture f = MakeFixture(fuserank::testing::SmallSpec(1, 2, 20, 4), 11, {3});
  ASSERT_NE(f.model, nullptr);
  std::fill(f.batch.user.weights.begin(), f.batch.user.weights.end(), 1.0f);
  std::fill(f.batch.item.weights.begin(), f.batch.item.weights.end(), 1.0f);
  BatchPacker packer(MakePackInfo(*f.model), false);
  auto h = packer.Plan(f.batch);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->has_weights, 0u);
  if (!f.batch.item.weights.empty()) {
    f.batch.item.weights.back() = 0.5f;
    h = packer.Plan(f.batch);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->has_weights, 1u);
  }
}

// A row past its table would fault the device: ValidateBatch() refuses it where the batch
// enters the engine, and the packer, which walks no id to re-check, aborts on a batch whose
// sizes disagree.
TEST(BatchPackerTest, ABatchThatWouldFaultTheDeviceNeverReachesIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Fixture f = MakeFixture(fuserank::testing::SmallSpec(1, 2, 20, 4), 12, {4, 2});
  ASSERT_NE(f.model, nullptr);
  BatchPacker packer(MakePackInfo(*f.model), false);
  ASSERT_TRUE(ValidateBatch(f.batch).ok());
  ASSERT_TRUE(packer.Plan(f.batch).ok());
  Batch bad = f.batch;
  bad.item.rows.push_back(3);
  bad.item.weights.push_back(1.0f);
  bad.item.bag_begin.back() += 1;
  bad.item.rows.back() = 20;  // == rows: out of range
  EXPECT_EQ(ValidateBatch(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = f.batch;
  bad.top_k.pop_back();
  EXPECT_DEATH(static_cast<void>(packer.Plan(bad)), "the batch was not validated");
  bad = f.batch;
  bad.item_dense.push_back(0.0f);
  EXPECT_DEATH(static_cast<void>(packer.Plan(bad)), "the batch was not validated");
  bad = f.batch;
  bad.user.bag_begin.pop_back();
  EXPECT_DEATH(static_cast<void>(packer.Plan(bad)), "the batch was not validated");
  bad = f.batch;
  bad.item.rows.push_back(0);  // a row outside every bag
  bad.item.weights.push_back(1.0f);
  EXPECT_DEATH(static_cast<void>(packer.Plan(bad)), "the batch was not validated");
  bad = f.batch;
  bad.candidate_begin.clear();  // nothing may read its back() before the check
  EXPECT_DEATH(static_cast<void>(packer.Plan(bad)), "the batch was not validated");
}

TEST(BatchPackerTest, ReorderListsEachTableRowOnceInOrder) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  Fixture f = MakeFixture(fuserank::testing::SmallSpec(2, 3, 7, 4), seed, {6, 3, 8});
  ASSERT_NE(f.model, nullptr);
  BatchPacker packer(MakePackInfo(*f.model), /*reorder_ids=*/true);
  auto h = packer.Plan(f.batch);
  ASSERT_TRUE(h.ok());
  std::vector<unsigned char> buf(h->total_bytes);
  packer.Write(f.batch, *h, buf.data());
  const auto unique = Read<kernels::UniqueRow>(buf, h->unique_rows, h->num_unique);
  ASSERT_EQ(unique.size(), packer.unique_rows().size());
  for (size_t k = 1; k < unique.size(); ++k) {
    ASSERT_TRUE(unique[k - 1].table < unique[k].table ||
                (unique[k - 1].table == unique[k].table && unique[k - 1].row < unique[k].row));
  }
  auto check = [&](const BagSet& bags, uint32_t rows_offset, uint32_t tables, uint32_t base) {
    const auto slots = Read<int32_t>(buf, rows_offset, bags.rows.size());
    for (size_t b = 0; b < bags.num_bags(); ++b) {
      for (uint32_t j = bags.bag_begin[b]; j < bags.bag_begin[b + 1]; ++j) {
        ASSERT_GE(slots[j], 0);
        ASSERT_LT(static_cast<size_t>(slots[j]), unique.size());
        EXPECT_EQ(unique[slots[j]].table, base + b % tables);
        EXPECT_EQ(unique[slots[j]].row, bags.rows[j]);
      }
    }
  };
  check(f.batch.user, h->user_rows, 2, 0);
  check(f.batch.item, h->item_rows, 3, 2);
  EXPECT_LE(h->num_unique, f.batch.user.rows.size() + f.batch.item.rows.size());
}

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
