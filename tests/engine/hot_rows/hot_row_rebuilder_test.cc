// PeriodicRebuilder: rebuilds every interval (each one a swap, each one decaying the
// counts) until stopped, and stops promptly in the middle of a long interval.
#include "engine/hot_rows/hot_row_rebuilder.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/hot_rows/hot_row_test_util.h"

namespace fuserank::engine {
namespace {

using test::HotRows;
using test::MakeHotRowManager;
using test::MakeHotRowTestModel;
using ::testing::ElementsAre;

TEST(PeriodicRebuilderTest, RebuildsEveryIntervalUntilStopped) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 13), 4);
  const std::vector<int32_t> rows = {5, 5, 5, 6};
  manager->ObserveRows(0, rows);
  std::atomic<int> ok_callbacks{0};
  std::vector<int32_t> first_rows;  // written by the first callback, read after Stop()
  PeriodicRebuilder rebuilder(manager.get(), absl::Milliseconds(10),
                              [&](const absl::StatusOr<HotRowsStatus>& s) {
                                if (!s.ok()) return;
                                if (ok_callbacks.fetch_add(1) == 0) {
                                  first_rows = HotRows(*manager, 0);
                                }
                              });
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (rebuilder.rebuilds() < 3 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  rebuilder.Stop();
  rebuilder.Stop();  // idempotent
  const int64_t rebuilds = rebuilder.rebuilds();
  EXPECT_GE(rebuilds, 3);
  EXPECT_EQ(ok_callbacks.load(), rebuilds);
  EXPECT_EQ(manager->version(), static_cast<uint64_t>(rebuilds));
  EXPECT_THAT(first_rows, ElementsAre(5, 6));
  // Each rebuild halved the counts (3 -> 1 -> 0, 1 -> 0): both rows have faded.
  EXPECT_TRUE(HotRows(*manager, 0).empty());
}

TEST(PeriodicRebuilderTest, StopsPromptlyDuringALongInterval) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 14), 4);
  auto rebuilder = std::make_unique<PeriodicRebuilder>(manager.get(), absl::Hours(1));
  absl::SleepFor(absl::Milliseconds(20));
  const absl::Time start = absl::Now();
  rebuilder.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(manager->version(), 0u);
}

}  // namespace
}  // namespace fuserank::engine
