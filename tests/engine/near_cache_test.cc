// The near cache: rows, absent keys and expiry; FIFO replacement that never loses or mixes
// up a key (the open-addressing index under heavy churn); FindMany answering exactly as
// Find does key by key. Randomized parts print their seed.
#include "engine/near_cache.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

using Found = NearCache::Found;
using std::chrono::milliseconds;

constexpr size_t kValueBytes = 24;

// The value this test writes for key at version v: distinct per (key, v).
std::vector<std::byte> ValueOf(int64_t key, int v = 0) {
  std::vector<std::byte> value(kValueBytes);
  for (size_t i = 0; i < kValueBytes; ++i) {
    value[i] = static_cast<std::byte>((static_cast<uint64_t>(key) * 131 + v * 7 + i) & 0xff);
  }
  return value;
}

TEST(NearCacheTest, HoldsRowsAndAbsentKeysUntilTheirTtl) {
  NearCache cache(64, kValueBytes, milliseconds(100));
  const auto t0 = NearCache::Clock::now();
  const std::vector<std::byte> row = ValueOf(7);
  cache.Insert(7, row.data(), t0);
  cache.Insert(-9, nullptr, t0);
  std::vector<std::byte> out(kValueBytes);
  EXPECT_EQ(cache.Find(7, t0, out.data()), Found::kRow);
  EXPECT_EQ(out, row);
  EXPECT_EQ(cache.Find(-9, t0, out.data()), Found::kAbsent);
  EXPECT_EQ(cache.Find(8, t0, out.data()), Found::kMiss);
  EXPECT_EQ(cache.Find(7, t0 + milliseconds(99), out.data()), Found::kRow);
  EXPECT_EQ(cache.Find(7, t0 + milliseconds(100), out.data()), Found::kMiss) << "expired";
  EXPECT_EQ(cache.Find(-9, t0 + milliseconds(100), out.data()), Found::kMiss);
  // A refresh replaces the value and restarts the ttl.
  const std::vector<std::byte> newer = ValueOf(7, 1);
  cache.Insert(7, newer.data(), t0 + milliseconds(150));
  EXPECT_EQ(cache.Find(7, t0 + milliseconds(200), out.data()), Found::kRow);
  EXPECT_EQ(out, newer);
}

TEST(NearCacheTest, AnEmptyCacheMissesEverything) {
  NearCache cache(0, kValueBytes, milliseconds(100));
  const auto now = NearCache::Clock::now();
  const std::vector<std::byte> row = ValueOf(1);
  cache.Insert(1, row.data(), now);
  std::vector<std::byte> out(kValueBytes);
  EXPECT_EQ(cache.Find(1, now, out.data()), Found::kMiss);
  std::vector<int64_t> keys = {1};
  std::vector<std::byte*> outs = {out.data()};
  std::vector<Found> found(1, Found::kRow);
  cache.FindMany(keys, now, outs, absl::MakeSpan(found));
  EXPECT_EQ(found[0], Found::kMiss);
}

// After far more inserts than slots, every slot holds a distinct key with its own value:
// replacement erased exactly the keys it replaced from the index, nothing else.
TEST(NearCacheTest, ChurnNeverLosesOrMixesUpAKey) {
  for (const size_t capacity : {1, 5, 16, 100, 1000}) {
    NearCache cache(capacity, kValueBytes, milliseconds(60'000));
    const auto now = NearCache::Clock::now();
    const int64_t inserted = static_cast<int64_t>(capacity) * 50 + 17;
    for (int64_t k = 0; k < inserted; ++k) {
      const std::vector<std::byte> value = ValueOf(k * 3);
      cache.Insert(k * 3, k % 11 == 0 ? nullptr : value.data(), now);
    }
    // The slots: 16 shards (fewer for a smaller capacity) of ceil(capacity / shards).
    const size_t shards = std::min<size_t>(NearCache::kMaxShards, capacity);
    const size_t slots = shards * ((capacity + shards - 1) / shards);
    size_t held = 0;
    std::vector<std::byte> out(kValueBytes);
    for (int64_t k = 0; k < inserted; ++k) {
      const Found f = cache.Find(k * 3, now, out.data());
      if (f == Found::kMiss) continue;
      ++held;
      EXPECT_EQ(f, k % 11 == 0 ? Found::kAbsent : Found::kRow) << "key " << k * 3;
      if (f == Found::kRow) {
        EXPECT_EQ(out, ValueOf(k * 3)) << "key " << k * 3;
      }
    }
    // Every slot holds one of the keys (each shard met about 50 times its slots).
    EXPECT_EQ(held, slots) << capacity;
    const std::vector<std::byte> last = ValueOf(-1);
    cache.Insert(-1, last.data(), now);
    EXPECT_EQ(cache.Find(-1, now, out.data()), Found::kRow) << "the newest key is held";
  }
}

TEST(NearCacheTest, FindManyAnswersAsFindDoes) {
  const uint32_t seed = 20261202;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  NearCache cache(300, kValueBytes, milliseconds(50));
  const auto t0 = NearCache::Clock::now();
  std::uniform_int_distribution<int64_t> key_of(-500, 500);
  for (int i = 0; i < 2000; ++i) {
    const int64_t key = key_of(rng);
    const std::vector<std::byte> value = ValueOf(key, i);
    // Some keys fetched long ago: expired at t0 + 60 ms.
    const auto fetched = t0 + milliseconds(i % 4 == 0 ? 0 : 30);
    cache.Insert(key, i % 9 == 0 ? nullptr : value.data(), fetched);
  }
  const auto now = t0 + milliseconds(60);
  for (const size_t n : {0, 1, 15, 16, 17, 100, 1000}) {
    std::vector<int64_t> keys(n);
    for (int64_t& key : keys) key = key_of(rng);  // duplicates and misses included
    std::vector<std::vector<std::byte>> many(n, std::vector<std::byte>(kValueBytes));
    std::vector<std::byte*> outs;
    for (auto& out : many) outs.push_back(out.data());
    std::vector<Found> found(n);
    cache.FindMany(keys, now, outs, absl::MakeSpan(found));
    int rows = 0;
    for (size_t i = 0; i < n; ++i) {
      std::vector<std::byte> one(kValueBytes);
      const Found expected = cache.Find(keys[i], now, one.data());
      ASSERT_EQ(found[i], expected) << "key " << keys[i];
      if (expected == Found::kRow) {
        EXPECT_EQ(many[i], one) << "key " << keys[i];
        ++rows;
      }
    }
    if (n >= 100) {
      EXPECT_GT(rows, 0) << "the test found no row at all";
    }
  }
}

}  // namespace
}  // namespace fuserank::engine
