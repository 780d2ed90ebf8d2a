// HotRowIndex's hash against rows chosen to collide: under a fixed multiplier (the
// Fibonacci one the index used before) 4,096 crafted rows fill one run of thousands of
// entries, which every probe homed there would walk; under the index's own random
// multiplier the same rows, and the consecutive rows of a typical hot set, stay within
// MaxRun(), and every row is still found at its slot.
#include <cstdint>
#include <set>
#include <vector>

#include "engine/hot_rows/hot_row_index.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

constexpr uint32_t kFibonacci = 0x9E3779B1u;
constexpr int kRows = 4096;  // arrays of 8192 entries: shift 19

// kRows rows whose homes under kFibonacci all fall in the first 256 of 8192 entries.
std::vector<int32_t> CraftedRows() {
  std::vector<int32_t> rows;
  for (int32_t r = 0; static_cast<int>(rows.size()) < kRows; ++r) {
    if (HotRowIndex::Home(r, kFibonacci, 19) < 256) rows.push_back(r);
  }
  return rows;
}

void ExpectEveryRowAtItsSlot(const HotRowIndex& index, const std::vector<int32_t>& rows) {
  for (size_t slot = 0; slot < rows.size(); ++slot) {
    ASSERT_EQ(index.Find(rows[slot]), static_cast<int32_t>(slot)) << "row " << rows[slot];
  }
}

TEST(HotRowIndexHashTest, CraftedRowsFillOneRunUnderAFixedMultiplierOnly) {
  const std::vector<int32_t> rows = CraftedRows();
  const HotRowIndex fixed(rows, kFibonacci);
  ASSERT_EQ(fixed.shift(), 19);
  EXPECT_GE(fixed.LongestRun(), size_t{kRows}) << "the attack no longer reproduces";
  ExpectEveryRowAtItsSlot(fixed, rows);
  for (int build = 0; build < 20; ++build) {
    const HotRowIndex index(rows);
    EXPECT_LE(index.LongestRun(), HotRowIndex::MaxRun(8192)) << "multiplier " << index.multiplier();
    ExpectEveryRowAtItsSlot(index, rows);
  }
}

TEST(HotRowIndexHashTest, ConsecutiveRowsStayWithinTheRunBound) {
  std::vector<int32_t> rows(kRows);
  for (int i = 0; i < kRows; ++i) rows[i] = i;  // the most frequent ids are often the smallest
  for (int build = 0; build < 20; ++build) {
    const HotRowIndex index(rows);
    EXPECT_LE(index.LongestRun(), HotRowIndex::MaxRun(8192)) << "multiplier " << index.multiplier();
    ExpectEveryRowAtItsSlot(index, rows);
  }
}

TEST(HotRowIndexHashTest, EachIndexDrawsItsOwnOddMultiplier) {
  const std::vector<int32_t> rows = {1, 2, 3};
  std::set<uint32_t> drawn;
  for (int build = 0; build < 8; ++build) {
    const uint32_t m = HotRowIndex(rows).multiplier();
    EXPECT_EQ(m & 0x80000001u, 0x80000001u) << m;
    drawn.insert(m);
  }
  EXPECT_GE(drawn.size(), 7u) << "8 draws of 30 random bits";
  EXPECT_EQ(HotRowIndex(rows, 12345u).multiplier(), 12345u);
}

TEST(HotRowIndexHashTest, LongestRunCountsRunsThatWrapAround) {
  // 2 rows in 4 entries at homes 3 and 3: entries 3 and 0 hold them, one run of 2.
  std::vector<int32_t> rows;
  for (int32_t r = 0; rows.size() < 2; ++r) {
    if (HotRowIndex::Home(r, kFibonacci, 30) == 3) rows.push_back(r);
  }
  const HotRowIndex index(rows, kFibonacci);
  ASSERT_EQ(index.keys().size(), 4u);
  EXPECT_EQ(index.keys()[3], rows[0]);
  EXPECT_EQ(index.keys()[0], rows[1]);
  EXPECT_EQ(index.LongestRun(), 2u);
}

}  // namespace
}  // namespace fuserank::engine
