// Read-copy-update under load: one writer swaps hot sets every ~2 ms (some swaps refused)
// while four readers resolve rows through the snapshot and compare the bytes with the
// table's own; zero mismatches, versions never go back, counters add up.
#include <atomic>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "gtest/gtest.h"
#include "tests/engine/hot_rows/hot_row_test_util.h"

namespace fuserank::engine {
namespace {

using test::MakeHotRowManager;
using test::MakeHotRowTestModel;

class HotRowManagerConcurrencyTest : public ::testing::TestWithParam<DType> {};

TEST_P(HotRowManagerConcurrencyTest, SwapsUnderReadersNeverChangeABit) {
  const uint64_t seed = 900 + static_cast<int>(GetParam());
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  constexpr int64_t kRows = 5000;
  constexpr int kCapacity = 512;
  const auto model = MakeHotRowTestModel(kRows, 8, GetParam(), seed);
  auto manager = MakeHotRowManager(model, kCapacity);
  // Runs until the writer has made kSwaps swaps and the readers taken kSnapshots snapshots
  // (well under a second here), not for a fixed time: a loaded machine only takes longer.
  // The deadline is a backstop: reaching it fails the test below.
  constexpr uint64_t kSwaps = 100;
  constexpr int64_t kSnapshots = 400;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  std::atomic<bool> done{false};
  std::atomic<int64_t> failures{0}, total_hits{0}, total_misses{0}, snapshots{0};
  uint64_t successes = 0;

  std::thread writer([&] {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> id(-2 * kRows, 2 * kRows), size(0, kCapacity);
    std::uniform_int_distribution<int64_t> reject_id(0, kRows - 1);
    const std::vector<std::string> names = {"user_0", "item_0", "item_1"};
    while ((successes < kSwaps || snapshots.load() < kSnapshots) && absl::Now() < deadline) {
      std::map<std::string, std::vector<int64_t>> request;
      for (int t = 0; t < 3; ++t) {
        if (rng() % 2 == 0) continue;
        auto& ids = request[names[t]];
        for (int64_t n = size(rng); n > 0; --n) ids.push_back(t == 2 ? reject_id(rng) : id(rng));
      }
      const bool refuse = rng() % 8 == 0;  // an over-capacity table: nothing may change
      if (refuse) {
        auto& ids = request["item_0"];
        ids.clear();
        for (int64_t i = 0; i <= kCapacity; ++i) ids.push_back(i);
      }
      const uint64_t version = manager->version();
      std::vector<TableIds> tables;
      for (const auto& [name, ids] : request) tables.push_back({name, ids});
      auto result = manager->Set(tables);
      if (refuse || request.empty()) {
        EXPECT_EQ(result.ok(), !refuse);
        EXPECT_EQ(manager->version(), version);
      } else {
        EXPECT_TRUE(result.ok()) << result.status();
        EXPECT_EQ(manager->version(), version + 1);
        ++successes;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    done.store(true);
  });

  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937_64 rng(seed * 31 + r);
      std::uniform_int_distribution<int64_t> id(-2 * kRows, 2 * kRows);
      uint64_t last_version = 0;
      while (!done.load()) {
        const std::shared_ptr<const HotRowSnapshot> snapshot = manager->snapshot();
        ++snapshots;
        if (snapshot->version < last_version) ++failures;
        last_version = snapshot->version;
        for (int t = 0; t < 3; ++t) {
          const EmbeddingTable& table = model->tables()[t];
          const HotSet& hot = snapshot->table(t);
          uint64_t hits = 0, misses = 0;
          for (int k = 0; k < 200; ++k) {
            int32_t row = 0;
            if (!MapRow(id(rng), table.rows, table.oov, &row)) continue;
            const int32_t slot = hot.FindSlot(row);
            if (slot < 0) {
              ++misses;
              continue;
            }
            ++hits;
            if (hot.rows()[slot] != row ||
                std::memcmp(hot.slot_data(slot), table.data + row * table.row_bytes,
                            table.row_bytes) != 0) {
              ++failures;
            }
          }
          manager->RecordLookups(t, hits, misses);
          total_hits += hits;
          total_misses += misses;
        }
      }
    });
  }
  writer.join();
  for (auto& t : readers) t.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(successes, kSwaps) << "too few swaps within 120 s to prove anything";
  EXPECT_EQ(manager->version(), successes);
  EXPECT_GT(total_hits.load(), 0);
  EXPECT_GE(snapshots.load(), kSnapshots);
  auto status = manager->Get({});
  ASSERT_TRUE(status.ok());
  uint64_t hits = 0, misses = 0;
  for (const auto& t : status->tables) {
    hits += t.hits;
    misses += t.misses;
  }
  EXPECT_EQ(hits, static_cast<uint64_t>(total_hits.load()));
  EXPECT_EQ(misses, static_cast<uint64_t>(total_misses.load()));
}

INSTANTIATE_TEST_SUITE_P(DTypes, HotRowManagerConcurrencyTest,
                         ::testing::Values(DType::kF32, DType::kBF16));

}  // namespace
}  // namespace fuserank::engine
