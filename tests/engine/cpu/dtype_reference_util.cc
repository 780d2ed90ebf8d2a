#include "tests/engine/cpu/dtype_reference_util.h"

#include <cmath>

namespace fuserank::engine::test {

double DecodeHalfReference(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f) return mantissa == 0 ? sign * INFINITY : NAN;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

double DecodeBFloat16Reference(uint16_t b) {
  const int sign = (b >> 15) ? -1 : 1;
  const int exponent = (b >> 7) & 0xff;
  const int mantissa = b & 0x7f;
  if (exponent == 0xff) return mantissa == 0 ? sign * INFINITY : NAN;
  if (exponent == 0) return sign * std::ldexp(mantissa, -133);
  return sign * std::ldexp(128 + mantissa, exponent - 134);
}

float RandomExactValue(DType dtype, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> pick(0, 63);
  if (pick(rng) == 0) return 0.0f;
  const uint16_t sign = pick(rng) < 32 ? 0x8000 : 0;
  std::uniform_int_distribution<int> mantissa(0, 0x3ff);
  switch (dtype) {
    case DType::kF16: {
      // Exponent field 0 (subnormal) .. 16 (2^1): values up to 4.
      std::uniform_int_distribution<int> exponent(0, 16);
      const uint16_t bits = sign | static_cast<uint16_t>(exponent(rng) << 10) | mantissa(rng);
      return static_cast<float>(DecodeHalfReference(bits));
    }
    case DType::kBF16: {
      std::uniform_int_distribution<int> exponent(107, 127);  // 2^-20 .. 2^0
      const uint16_t bits =
          sign | static_cast<uint16_t>(exponent(rng) << 7) | (mantissa(rng) & 0x7f);
      return static_cast<float>(DecodeBFloat16Reference(bits));
    }
    default: {
      std::uniform_real_distribution<float> value(-1.0f, 1.0f);
      return value(rng);
    }
  }
}

}  // namespace fuserank::engine::test
