// HotRowIndex against std::unordered_map (members, non-members, the exposed flat layout
// probed by hand as a GPU kernel would), and HotSet: ids mapped like requests (MapRow),
// duplicates collapsing, refusals naming table / id / counts, and row bytes (and int8
// qparams) bit-identical to the table for every dtype.
#include "engine/hot_rows/hot_rows.h"

#include <cstring>
#include <random>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

using ::testing::HasSubstr;

// The probe a kernel would run over keys()/values(), written from the header's contract.
int32_t ProbeLikeAKernel(const HotRowIndex& index, int32_t row) {
  const auto keys = index.keys();
  const auto values = index.values();
  uint32_t i = (static_cast<uint32_t>(row) * index.multiplier()) >> index.shift();
  while (true) {
    if (keys[i] == row) return values[i];
    if (keys[i] == -1) return -1;
    i = (i + 1) & index.mask();
  }
}

class HotRowIndexTest : public ::testing::TestWithParam<int> {};

TEST_P(HotRowIndexTest, FindsExactlyTheMembersWithTheirSlots) {
  const int n = GetParam();
  const uint64_t seed = 1000 + n;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> any_row(0, 2'000'000);
  std::unordered_map<int32_t, int32_t> reference;
  std::vector<int32_t> rows;
  while (static_cast<int>(rows.size()) < n) {
    const int32_t row = any_row(rng);
    if (reference.emplace(row, static_cast<int32_t>(rows.size())).second) rows.push_back(row);
  }
  const HotRowIndex index(rows);

  const size_t size = index.keys().size();
  EXPECT_EQ(size, index.values().size());
  EXPECT_EQ(size, size_t{index.mask()} + 1);
  EXPECT_EQ(size & (size - 1), 0u) << "not a power of two";
  EXPECT_GE(size, std::max<size_t>(2, 2 * rows.size()));
  EXPECT_EQ(size, size_t{1} << (32 - index.shift()));
  size_t occupied = 0;
  for (size_t i = 0; i < size; ++i) {
    if (index.keys()[i] == HotRowIndex::kEmpty) {
      EXPECT_EQ(index.values()[i], -1);
    } else {
      ++occupied;
    }
  }
  EXPECT_EQ(occupied, rows.size());

  for (const auto& [row, slot] : reference) {
    ASSERT_EQ(index.Find(row), slot) << "row " << row;
    ASSERT_EQ(ProbeLikeAKernel(index, row), slot) << "row " << row;
  }
  for (int k = 0; k < 20000; ++k) {
    const int32_t row = any_row(rng);
    const int32_t expected = reference.count(row) ? reference[row] : -1;
    ASSERT_EQ(index.Find(row), expected) << "row " << row;
    ASSERT_EQ(ProbeLikeAKernel(index, row), expected) << "row " << row;
  }
  EXPECT_EQ(index.Find(-1), -1);
  EXPECT_EQ(index.Find(-12345), -1);
}

INSTANTIATE_TEST_SUITE_P(Sizes, HotRowIndexTest, ::testing::Values(0, 1, 2, 3, 64, 1000, 5000));

// A table of random bytes (bit identity needs no meaningful values) in `dtype`.
struct TestTable {
  EmbeddingTable table;
  std::vector<std::byte> storage;
  std::vector<float> qparams;
};

TestTable MakeTable(DType dtype, int64_t rows, int dim, Oov oov, uint64_t seed) {
  TestTable t;
  const size_t element = dtype == DType::kF32 ? 4 : dtype == DType::kInt8 ? 1 : 2;
  t.table.name = "item_id";
  t.table.spec_index = 3;
  t.table.dtype = dtype;
  t.table.oov = oov;
  t.table.rows = rows;
  t.table.dim = dim;
  t.table.row_bytes = element * dim;
  std::mt19937_64 rng(seed);
  t.storage.resize(rows * t.table.row_bytes);
  for (std::byte& b : t.storage) b = static_cast<std::byte>(rng());
  t.table.data = t.storage.data();
  if (dtype == DType::kInt8) {
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (int64_t i = 0; i < 2 * rows; ++i) t.qparams.push_back(value(rng));
    t.table.qparams = t.qparams.data();
  }
  return t;
}

class HotSetDTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(HotSetDTypeTest, HotRowBytesAreBitIdenticalToTheTable) {
  const uint64_t seed = 77 + static_cast<int>(GetParam());
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const TestTable t = MakeTable(GetParam(), 1000, 12, Oov::kModulo, seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> any_id(-5000, 5000);
  std::vector<int64_t> ids;
  for (int i = 0; i < 200; ++i) ids.push_back(any_id(rng));
  auto set = HotSet::FromIds(t.table, ids, 256);
  ASSERT_TRUE(set.ok()) << set.status();
  const HotSet& hot = **set;

  EXPECT_EQ(hot.table_index(), 3);
  EXPECT_EQ(hot.table_name(), "item_id");
  const EmbeddingTable& compact = hot.compact_table();
  EXPECT_EQ(compact.rows, hot.size());
  EXPECT_EQ(compact.dtype, t.table.dtype);
  EXPECT_EQ(compact.dim, t.table.dim);
  EXPECT_EQ(compact.row_bytes, t.table.row_bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(compact.data) % 64, 0u);

  for (int32_t row = 0; row < t.table.rows; ++row) {
    const int32_t slot = hot.FindSlot(row);
    const std::byte* bytes = hot.FindRow(row);
    if (slot < 0) {
      EXPECT_EQ(bytes, nullptr);
      continue;
    }
    ASSERT_EQ(hot.rows()[slot], row);
    ASSERT_EQ(bytes, hot.slot_data(slot));
    ASSERT_EQ(std::memcmp(bytes, t.table.data + row * t.table.row_bytes, t.table.row_bytes), 0)
        << "row " << row;
    ASSERT_EQ(std::memcmp(compact.data + slot * compact.row_bytes, bytes, compact.row_bytes), 0);
    if (GetParam() == DType::kInt8) {
      ASSERT_EQ(std::memcmp(hot.slot_qparams(slot), t.table.qparams + 2 * row, 8), 0);
      ASSERT_EQ(compact.qparams + 2 * slot, hot.slot_qparams(slot));
    } else {
      ASSERT_EQ(hot.slot_qparams(slot), nullptr);
    }
  }
  // Every id's row is in the set.
  for (const int64_t id : ids) {
    int32_t row = 0;
    ASSERT_TRUE(MapRow(id, t.table.rows, t.table.oov, &row));
    EXPECT_GE(hot.FindSlot(row), 0) << "id " << id;
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, HotSetDTypeTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kInt8));

TEST(HotSetTest, MapsIdsLikeRequestsAndCollapsesDuplicates) {
  const TestTable t = MakeTable(DType::kF32, 100, 4, Oov::kModulo, 5);
  // 105 and -95 map to row 5; -1 maps to 99; 7 twice.
  const std::vector<int64_t> ids = {5, 105, 7, -95, -1, 7, 5};
  auto set = HotSet::FromIds(t.table, ids, 7);  // seven ids: SPEC counts every one
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT((*set)->rows(), ::testing::ElementsAre(5, 7, 99));  // first appearance order
  EXPECT_EQ((*set)->FindSlot(5), 0);
  EXPECT_EQ((*set)->FindSlot(7), 1);
  EXPECT_EQ((*set)->FindSlot(99), 2);
  EXPECT_EQ((*set)->FindSlot(6), -1);
}

TEST(HotSetTest, RefusesAnOutOfRangeIdInARejectTable) {
  const TestTable t = MakeTable(DType::kF32, 100, 4, Oov::kReject, 6);
  const std::vector<int64_t> ids = {1, 2, 100, 3};
  auto set = HotSet::FromIds(t.table, ids, 10);
  ASSERT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr("item_id"));
  EXPECT_THAT(set.status().message(), HasSubstr("100"));
  const std::vector<int64_t> negative = {-1};
  EXPECT_EQ(HotSet::FromIds(t.table, negative, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<int64_t> in_range = {0, 99};
  EXPECT_TRUE(HotSet::FromIds(t.table, in_range, 10).ok());
}

TEST(HotSetTest, RefusesMoreIdsThanCapacity) {
  const TestTable t = MakeTable(DType::kF32, 100, 4, Oov::kModulo, 7);
  const std::vector<int64_t> five = {1, 2, 3, 4, 5};
  auto set = HotSet::FromIds(t.table, five, 4);
  ASSERT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr("item_id"));
  EXPECT_THAT(set.status().message(), HasSubstr("5 ids, more than the hot-set capacity 4"));
  // Six ids of four distinct rows (101 is row 1, 2 twice): more ids than capacity, as SPEC
  // section 3 counts them.
  const std::vector<int64_t> duplicates = {1, 2, 3, 4, 101, 2};
  EXPECT_EQ(HotSet::FromIds(t.table, duplicates, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Four ids, three rows: fits, the repeated row once.
  const std::vector<int64_t> aliased = {1, 2, 101, 3};
  auto fits = HotSet::FromIds(t.table, aliased, 4);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ((*fits)->size(), 3);
  // Capacity 0 takes only the empty set.
  EXPECT_TRUE(HotSet::FromIds(t.table, {}, 0).ok());
  EXPECT_FALSE(HotSet::FromIds(t.table, five, 0).ok());
}

TEST(HotSetTest, FromRowsRefusesRowsOutsideTheTable) {
  const TestTable t = MakeTable(DType::kF32, 100, 4, Oov::kModulo, 8);
  for (const int32_t bad : {-1, 100, 1 << 30}) {
    const std::vector<int32_t> rows = {3, bad};
    EXPECT_EQ(HotSet::FromRows(t.table, rows, 10).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  const std::vector<int32_t> rows = {9, 3, 9};
  auto set = HotSet::FromRows(t.table, rows, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT((*set)->rows(), ::testing::ElementsAre(9, 3));
}

TEST(HotSetTest, EmptySetMissesEverything) {
  const TestTable t = MakeTable(DType::kBF16, 50, 8, Oov::kModulo, 9);
  const auto set = HotSet::Empty(t.table);
  EXPECT_EQ(set->size(), 0);
  EXPECT_EQ(set->compact_table().rows, 0);
  for (int32_t row = 0; row < 50; ++row) EXPECT_EQ(set->FindRow(row), nullptr);
}

}  // namespace
}  // namespace fuserank::engine
