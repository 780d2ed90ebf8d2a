// MemoryTrimmer's causes, driven directly: a large call, a large parsed request, the end of
// a spike of calls in flight; and what must not trim: steady traffic, a spike under 64 MiB.
// CallDone says at once whether it asked for a trim, so no check waits for one not to come.
#include "server/memory_trimmer.h"

#include <chrono>
#include <deque>
#include <thread>

#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

constexpr size_t kKiB = 1024;

// Waits until `trimmer` has trimmed `n` times (true) or 10 s have passed (false).
bool WaitForTrims(const MemoryTrimmer& trimmer, int n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (trimmer.trims() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST(MemoryTrimmerTest, ALargeCallTrims) {
  MemoryTrimmer trimmer;
  trimmer.CallReceived(MemoryTrimmer::kLargeRequestBytes);
  EXPECT_TRUE(
      trimmer.CallDone(MemoryTrimmer::kLargeRequestBytes, MemoryTrimmer::kLargeRequestBytes));
  EXPECT_TRUE(WaitForTrims(trimmer, 1));
  // A small request that parsing made large (ModelInfer's values) is large too.
  trimmer.CallReceived(kKiB);
  EXPECT_TRUE(trimmer.CallDone(kKiB, 2 * MemoryTrimmer::kLargeRequestBytes));
  EXPECT_TRUE(WaitForTrims(trimmer, 2));
}

// 200 calls of 512 KiB in flight at once (100 MiB), then answered: the call that brings
// their bytes down to an eighth of the peak asks for the trim, and no other call does.
TEST(MemoryTrimmerTest, TheEndOfASpikeTrimsOnce) {
  MemoryTrimmer trimmer;
  constexpr size_t kCall = 512 * kKiB;
  for (int i = 0; i < 200; ++i) trimmer.CallReceived(kCall);
  int asked = 0;
  for (int i = 0; i < 175; ++i) asked += trimmer.CallDone(kCall, kCall) ? 1 : 0;
  EXPECT_EQ(asked, 1) << "25 calls (12.5 MiB) left: an eighth of the peak";
  for (int i = 0; i < 25; ++i) asked += trimmer.CallDone(kCall, kCall) ? 1 : 0;
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(WaitForTrims(trimmer, 1));
  // A second spike is a new cause.
  for (int i = 0; i < 200; ++i) trimmer.CallReceived(kCall);
  for (int i = 0; i < 200; ++i) asked += trimmer.CallDone(kCall, kCall) ? 1 : 0;
  EXPECT_EQ(asked, 2);
  EXPECT_TRUE(WaitForTrims(trimmer, 2));
}

// 100,000 calls of 50 KiB, 16 in flight at a time (5 GB through, 800 KiB held): no call
// asks for a trim.
TEST(MemoryTrimmerTest, SteadyTrafficNeverTrims) {
  MemoryTrimmer trimmer;
  constexpr size_t kCall = 50 * kKiB;
  std::deque<size_t> live;
  int asked = 0;
  for (int i = 0; i < 100000; ++i) {
    trimmer.CallReceived(kCall);
    live.push_back(kCall);
    if (live.size() > 16) {
      asked += trimmer.CallDone(live.front(), live.front()) ? 1 : 0;
      live.pop_front();
    }
  }
  for (size_t bytes : live) asked += trimmer.CallDone(bytes, bytes) ? 1 : 0;
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(trimmer.trims(), 0);
}

// Just under 64 MiB in flight, every call under 1 MiB: no cause.
TEST(MemoryTrimmerTest, ASpikeUnderItsBoundDoesNotTrim) {
  MemoryTrimmer trimmer;
  constexpr size_t kCall = MemoryTrimmer::kLargeRequestBytes - 1;
  constexpr int kCalls = static_cast<int>(MemoryTrimmer::kSpikeBytes / kCall) - 1;
  int asked = 0;
  for (int i = 0; i < kCalls; ++i) trimmer.CallReceived(kCall);
  for (int i = 0; i < kCalls; ++i) asked += trimmer.CallDone(kCall, kCall) ? 1 : 0;
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(trimmer.trims(), 0);
}

}  // namespace
}  // namespace fuserank::server
