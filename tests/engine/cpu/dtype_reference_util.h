// Test-side decoders of the 16-bit table dtypes, written from the IEEE / bfloat16 bit
// layouts independently of engine/cpu/cpu_dtype.h, and random values exact in a dtype.
#ifndef FUSERANK_TESTS_ENGINE_CPU_DTYPE_REFERENCE_UTIL_H_
#define FUSERANK_TESTS_ENGINE_CPU_DTYPE_REFERENCE_UTIL_H_

#include <cstdint>
#include <random>

#include "engine/model_spec.h"

namespace fuserank::engine::test {

// sign * mantissa * 2^exponent of an IEEE binary16 / a bfloat16 pattern (NaN for NaN).
double DecodeHalfReference(uint16_t bits);
double DecodeBFloat16Reference(uint16_t bits);

// A random float exactly representable in `dtype` (fp32: any float of the range), with
// magnitude in about [2^-20, 2] for fp16 (subnormals included) and bf16, so that the
// stored patterns cover many exponents; zero now and then.
float RandomExactValue(DType dtype, std::mt19937_64& rng);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_CPU_DTYPE_REFERENCE_UTIL_H_
