// MemoryBudget: reservations add up, are given back when destroyed or moved over, and a
// reservation that does not fit is refused naming the numbers and the key.
#include "server/model_budget.h"

#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(MemoryBudgetTest, ReservesUpToTheLimitAndGivesBackOnDestruction) {
  MemoryBudget budget(1000);
  EXPECT_EQ(budget.limit(), 1000u);
  {
    absl::StatusOr<MemoryBudget::Reservation> a = budget.Reserve(600, "model 'a'");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(budget.used(), 600u);
    EXPECT_TRUE(budget.Check(400, "model 'b'").ok());
    const absl::Status refused = budget.Check(401, "model 'b' version '2'", "weights 401 B");
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(refused.message(),
                AllOf(HasSubstr("model 'b' version '2' needs 401 B (weights 401 B), but 600 B of "
                                "the 1000 B model memory budget (model.memory_budget_bytes)")));
    EXPECT_FALSE(budget.Reserve(401, "b").ok());
    EXPECT_EQ(budget.used(), 600u);
    MemoryBudget::Reservation moved = std::move(*a);
    EXPECT_EQ(moved.bytes(), 600u);
    EXPECT_EQ(budget.used(), 600u);
  }
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_FALSE(budget.Reserve(1001, "huge").ok());
  EXPECT_FALSE(budget.Reserve(~uint64_t{0}, "overflowing").ok());
}

TEST(MemoryBudgetTest, ZeroMeansThreeQuartersOfTheMemoryAvailable) {
  MemoryBudget budget(0);
  EXPECT_EQ(budget.limit(), MemoryBudget::AutoLimit());
  EXPECT_GT(budget.limit(), uint64_t{64} << 20);
}

}  // namespace
}  // namespace fuserank::server
