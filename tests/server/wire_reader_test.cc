#include "server/wire_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace fuserank::server::wire {
namespace {

// The varints of a packed field, counted one byte at a time.
int64_t Naive(const std::vector<uint8_t>& bytes, size_t begin, size_t end) {
  int64_t count = 0;
  for (size_t i = begin; i < end; ++i) count += bytes[i] < 0x80;
  return count;
}

TEST(CountVarintEndsTest, CountsTheBytesBelow0x80) {
  const std::vector<uint8_t> bytes = {0x01, 0x96, 0x01, 0xff, 0xff, 0x7f, 0x80, 0x00};
  EXPECT_EQ(CountVarintEnds(bytes.data(), bytes.data()), 0);
  EXPECT_EQ(CountVarintEnds(bytes.data(), bytes.data() + bytes.size()), 4);
}

TEST(CountVarintEndsTest, AgreesWithAByteLoopAtEveryOffsetAndLength) {
  std::mt19937 rng(7);
  std::vector<uint8_t> bytes(100);
  for (int round = 0; round < 20; ++round) {
    // Mostly continuation bytes in some rounds, mostly one-byte varints in others.
    const unsigned high = round % 4 == 0 ? 250u : round % 4 == 1 ? 5u : 128u;
    for (uint8_t& b : bytes)
      b = static_cast<uint8_t>((rng() & 0x7f) | (rng() % 256 < high ? 0x80 : 0));
    for (size_t begin = 0; begin < 20; ++begin) {
      for (size_t end = begin; end <= bytes.size(); ++end) {
        ASSERT_EQ(CountVarintEnds(bytes.data() + begin, bytes.data() + end),
                  Naive(bytes, begin, end))
            << "round " << round << ", bytes [" << begin << ", " << end << ")";
      }
    }
  }
}

}  // namespace
}  // namespace fuserank::server::wire
