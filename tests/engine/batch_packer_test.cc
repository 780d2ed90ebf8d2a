// The packed batch the GPU reads, tested without a GPU: the sections of its layout
// (kernels/batch_layout.h) and the packer that writes a batch into it (engine/cuda/
// batch_packer.h), plain and id-reorder, and its checks of a batch that was not validated.
#include "engine/cuda/batch_packer.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/batch_validation.h"
#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "kernels/batch_layout.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

using kernels::PackedHeader;

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
  // Ids per table, user tables first: bag b of a side is of its table b % tables.
  std::vector<uint64_t> ids(2 + 3, 0);
  for (size_t bag = 0; bag < b.user.num_bags(); ++bag) {
    ids[bag % 2] += b.user.bag_begin[bag + 1] - b.user.bag_begin[bag];
  }
  for (size_t bag = 0; bag < b.item.num_bags(); ++bag) {
    ids[2 + bag % 3] += b.item.bag_begin[bag + 1] - b.item.bag_begin[bag];
  }
  EXPECT_EQ(packer.ids_per_table(), ids);
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

// Bags of four ids each, every one with the weights `w[bag % w.size()]`: replaces `bags`,
// whose owners and tables stay as they were.
void SetBagWeights(BagSet* bags, const std::vector<std::vector<float>>& w) {
  const size_t n = bags->num_bags();
  bags->Clear();
  for (size_t b = 0; b < n; ++b) {
    for (int j = 0; j < 4; ++j) {
      bags->rows.push_back(j);
      bags->weights.push_back(w[b % w.size()][j]);
    }
    bags->bag_begin.push_back(static_cast<uint32_t>(bags->rows.size()));
  }
}

// A mean-pooled bag whose weights add up to 0 is packed with zero weights, so the kernels'
// float sum is 0 and the bag pools to the zero vector (SPEC section 2), as the CPU engine's
// double sum makes it: {1, 2^-24, -1, -2^-24} adds up to -2^-24 in float. Sum-pooled bags
// and mean bags with any other sum keep their weights.
TEST(BatchPackerTest, MeanBagsWhoseWeightsCancelArePackedWithZeroWeights) {
  ModelSpec spec = fuserank::testing::SmallSpec(1, 2, 20, 4);
  spec.tables[0].pooling = Pooling::kMean;  // user_0
  spec.tables[1].pooling = Pooling::kMean;  // item_0; item_1 sums
  Fixture f = MakeFixture(spec, 5, {2, 1});
  ASSERT_NE(f.model, nullptr);
  const float tiny = 1.0f / (1 << 24);
  const std::vector<float> cancelling = {1.0f, tiny, -1.0f, -tiny};
  ASSERT_EQ(((1.0f + tiny) + -1.0f) + -tiny, -tiny);  // what a float running sum leaves
  const std::vector<float> other = {0.5f, 0.25f, -0.5f, 0.125f};
  // Item bags: candidate-major, item_0 then item_1; 3 candidates, so bags 0..5.
  SetBagWeights(&f.batch.item, {cancelling, cancelling, other, other, cancelling, other});
  SetBagWeights(&f.batch.user, {cancelling, other});
  BatchPacker packer(MakePackInfo(*f.model), false);
  auto h = packer.Plan(f.batch);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->has_weights, 1u);
  std::vector<unsigned char> buf(h->total_bytes);
  packer.Write(f.batch, *h, buf.data());
  const std::vector<float> zero(4, 0.0f);
  const auto item = Read<float>(buf, h->item_weights, 24);
  const auto user = Read<float>(buf, h->user_weights, 8);
  auto bag = [](const std::vector<float>& v, int b) {
    return std::vector<float>(v.begin() + 4 * b, v.begin() + 4 * b + 4);
  };
  EXPECT_EQ(bag(item, 0), zero);        // item_0 (mean), cancelling
  EXPECT_EQ(bag(item, 1), cancelling);  // item_1 sums
  EXPECT_EQ(bag(item, 2), other);       // item_0, another sum
  EXPECT_EQ(bag(item, 3), other);
  EXPECT_EQ(bag(item, 4), zero);   // item_0, cancelling, candidate 2
  EXPECT_EQ(bag(item, 5), other);  // item_1
  EXPECT_EQ(bag(user, 0), zero);   // user_0 (mean), request 0
  EXPECT_EQ(bag(user, 1), other);  // request 1
}

// top_k 0 reads as every candidate, as the CPU backend reads it: the packed top_k and the
// result offsets equal the CPU backend's result. ValidateBatch() refuses 0 for a request
// with candidates (the decoders write the count), so only a batch built without the
// decoders, a benchmark's or a test's, brings it; the backends must still agree on it.
TEST(BatchPackerTest, TopKZeroRanksEveryCandidateAsTheCpuBackendDoes) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  Fixture f = MakeFixture(fuserank::testing::SmallSpec(2, 3, 50, 8), seed, {5, 0, 1, 9});
  ASSERT_NE(f.model, nullptr);
  f.batch.top_k = {0, 0, 0, 4};
  BatchPacker packer(MakePackInfo(*f.model), /*reorder_ids=*/false);
  auto planned = packer.Plan(f.batch);
  ASSERT_TRUE(planned.ok()) << planned.status();
  std::vector<unsigned char> buf(planned->total_bytes);
  packer.Write(f.batch, *planned, buf.data());
  EXPECT_EQ(Read<uint32_t>(buf, planned->top_k, 4), (std::vector<uint32_t>{5, 0, 1, 4}));
  EXPECT_EQ(packer.result_begin(), (std::vector<uint32_t>{0, 5, 5, 6, 10}));
  EXPECT_EQ(planned->total_results, 10u);
  BackendOptions options;
  options.workers = 1;
  BatchResult cpu;
  ASSERT_TRUE(CreateCpuBackend(f.model, options)->Run(0, f.batch, &cpu).ok());
  EXPECT_EQ(packer.result_begin(), cpu.result_begin);
  EXPECT_EQ(Read<uint32_t>(buf, planned->result_begin, 5), cpu.result_begin);
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

}  // namespace
}  // namespace fuserank::engine::cuda
