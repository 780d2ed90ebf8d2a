// fp16 / bf16 conversions of engine/cpu/cpu_dtype.h against the test-side decoders
// (sign * mantissa * 2^exponent) and a nearest-value search for the encoders.
#include "engine/cpu/cpu_dtype.h"

#include <cmath>
#include <cstdint>
#include <random>

#include "gtest/gtest.h"
#include "tests/engine/cpu/dtype_reference_util.h"

namespace fuserank::engine {
namespace {

using test::DecodeBFloat16Reference;
using test::DecodeHalfReference;

// IEEE round to nearest, ties to the even pattern, of x into a 16-bit format: binary
// search over the positive patterns [0, inf_bits], which decode increasingly; for
// rounding, the Inf pattern stands for `limit` (2^(emax+1), the next value after the
// largest finite one), so values past the halfway point overflow to Inf.
template <typename Decode>
uint16_t NearestPattern(double x, uint16_t inf_bits, double limit, Decode decode) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  auto value = [&](uint16_t p) { return p == inf_bits ? limit : decode(p); };
  if (a >= limit) return sign | inf_bits;
  uint16_t lo = 0, hi = inf_bits;  // value(lo) <= a < value(hi)
  while (hi - lo > 1) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    (value(mid) <= a ? lo : hi) = mid;
  }
  const double below = a - value(lo);
  const double above = value(hi) - a;
  uint16_t pick = below < above ? lo : above < below ? hi : ((lo & 1) == 0 ? lo : hi);
  return sign | pick;
}

TEST(CpuDtypeTest, HalfDecodesEveryPatternExactly) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const double expected = DecodeHalfReference(h);
    const float got = HalfToFloat(h);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
    } else {
      ASSERT_EQ(static_cast<double>(got), expected) << std::hex << bits;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << bits;
      ASSERT_EQ(FloatToHalf(got), h) << "round trip of " << std::hex << bits;
    }
  }
}

TEST(CpuDtypeTest, BFloat16DecodesEveryPatternExactly) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    const double expected = DecodeBFloat16Reference(b);
    const float got = BFloat16ToFloat(b);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
      EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(got)))) << std::hex << bits;
    } else {
      ASSERT_EQ(static_cast<double>(got), expected) << std::hex << bits;
      ASSERT_EQ(FloatToBFloat16(got), b) << "round trip of " << std::hex << bits;
    }
  }
}

TEST(CpuDtypeTest, EncodersRoundToNearestEven) {
  const uint64_t seed = 20240611;
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> bits_dist;
  for (int i = 0; i < 200000; ++i) {
    // Random floats around the half range (incl. its subnormals, overflow, halfway points).
    uint32_t bits = bits_dist(rng);
    const int exponent = 100 + static_cast<int>(bits_dist(rng) % 50);  // 2^-27 .. 2^22
    bits = (bits & 0x807fffffu) | (static_cast<uint32_t>(exponent) << 23);
    if (i % 4 == 0) bits &= ~0x0fffu;  // many exact halfway / representable cases
    const float f = BitsToFloat(bits);
    ASSERT_EQ(FloatToHalf(f), NearestPattern(f, 0x7c00, 65536.0, DecodeHalfReference)) << f;
  }
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = bits_dist(rng);
    if ((bits & 0x7f800000u) == 0x7f800000u) continue;  // finite floats only
    if (i % 4 == 0) bits &= ~0x7fffu;
    const float f = BitsToFloat(bits);
    ASSERT_EQ(FloatToBFloat16(f),
              NearestPattern(f, 0x7f80, std::ldexp(1.0, 128), DecodeBFloat16Reference))
        << f;
  }
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xfc00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
}

}  // namespace
}  // namespace fuserank::engine
