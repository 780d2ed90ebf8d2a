// ObjectPool (engine/object_pool.h): the last returned object comes back recycled, the
// pool keeps within its object and byte bounds, an object holding too much is freed, the
// hook may trim instead, and concurrent use keeps the bounds.
#include "engine/object_pool.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

struct Buffer {
  std::vector<int> data;
  int recycled = 0;
};

// Clears the buffer and counts its capacity in bytes.
size_t ClearAndCount(Buffer& buffer) {
  buffer.data.clear();
  ++buffer.recycled;
  return buffer.data.capacity() * sizeof(int);
}

TEST(ObjectPoolTest, GivesBackTheLastReturnedObjectRecycled) {
  ObjectPool<Buffer> pool({}, ClearAndCount);
  std::unique_ptr<Buffer> first = pool.Acquire();
  std::unique_ptr<Buffer> second = pool.Acquire();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(first.get(), second.get());
  first->data.assign(10, 7);
  const Buffer* address = first.get();
  pool.Release(std::move(second));
  pool.Release(std::move(first));
  EXPECT_EQ(pool.kept_objects(), 2u);
  EXPECT_EQ(pool.kept_bytes(), 10 * sizeof(int));
  std::unique_ptr<Buffer> again = pool.Acquire();
  EXPECT_EQ(again.get(), address);
  EXPECT_EQ(again->recycled, 1);
  EXPECT_TRUE(again->data.empty());
  EXPECT_GE(again->data.capacity(), 10u) << "a recycled object keeps its capacity";
  EXPECT_EQ(pool.kept_bytes(), 0u);
  pool.Release(nullptr);  // nothing
  EXPECT_EQ(pool.kept_objects(), 1u);
}

TEST(ObjectPoolTest, KeepsAtMostMaxObjects) {
  ObjectPoolLimits limits;
  limits.max_objects = 2;
  ObjectPool<Buffer> pool(limits, ClearAndCount);
  std::vector<std::unique_ptr<Buffer>> held;
  for (int i = 0; i < 5; ++i) held.push_back(pool.Acquire());
  for (auto& buffer : held) pool.Release(std::move(buffer));
  EXPECT_EQ(pool.kept_objects(), 2u);
}

TEST(ObjectPoolTest, FreesAnObjectHoldingMoreThanMaxObjectBytes) {
  ObjectPoolLimits limits;
  limits.max_object_bytes = 100 * sizeof(int);
  ObjectPool<Buffer> pool(limits, ClearAndCount);
  std::unique_ptr<Buffer> large = pool.Acquire();
  large->data.resize(101);
  pool.Release(std::move(large));
  EXPECT_EQ(pool.kept_objects(), 0u) << "the large object was kept";
  std::unique_ptr<Buffer> small = pool.Acquire();
  small->data.resize(100);
  pool.Release(std::move(small));
  EXPECT_EQ(pool.kept_objects(), 1u) << "an object at the limit is kept";
}

TEST(ObjectPoolTest, KeepsAtMostMaxBytesInAll) {
  ObjectPoolLimits limits;
  limits.max_bytes = 250 * sizeof(int);
  ObjectPool<Buffer> pool(limits, ClearAndCount);
  std::vector<std::unique_ptr<Buffer>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(pool.Acquire());
    held.back()->data.resize(100);
  }
  for (auto& buffer : held) pool.Release(std::move(buffer));
  EXPECT_EQ(pool.kept_objects(), 2u);
  EXPECT_EQ(pool.kept_bytes(), 200 * sizeof(int));
  pool.Acquire();  // its bytes leave the count with it
  EXPECT_EQ(pool.kept_bytes(), 100 * sizeof(int));
}

TEST(ObjectPoolTest, TheHookMayTrimALargeBufferSoThatItIsKept) {
  ObjectPoolLimits limits;
  limits.max_object_bytes = 64 * sizeof(int);
  ObjectPool<Buffer> pool(limits, [](Buffer& buffer) {
    if (buffer.data.capacity() > 64) std::vector<int>().swap(buffer.data);  // trim
    return ClearAndCount(buffer);
  });
  std::unique_ptr<Buffer> large = pool.Acquire();
  large->data.resize(1000);
  const Buffer* address = large.get();
  pool.Release(std::move(large));
  std::unique_ptr<Buffer> again = pool.Acquire();
  EXPECT_EQ(again.get(), address);
  EXPECT_EQ(again->data.capacity(), 0u);
}

TEST(ObjectPoolTest, ConcurrentUseKeepsTheBounds) {
  ObjectPoolLimits limits;
  limits.max_objects = 8;
  ObjectPool<Buffer> pool(limits, ClearAndCount);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, &failures, t] {
      for (int i = 0; i < 2000; ++i) {
        std::unique_ptr<Buffer> a = pool.Acquire();
        std::unique_ptr<Buffer> b = pool.Acquire();
        if (!a->data.empty() || !b->data.empty()) failures.fetch_add(1);
        a->data.assign(1 + (i + t) % 5, t);
        pool.Release(std::move(a));
        pool.Release(std::move(b));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0) << "an acquired object was not recycled";
  EXPECT_LE(pool.kept_objects(), 8u);
}

}  // namespace
}  // namespace fuserank::engine
