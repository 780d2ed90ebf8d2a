#include "engine/cpu/sgemm_bf16.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/check.h"
#include "engine/cpu/cpu_saturate.h"
#include "engine/cpu/cpu_simd.h"

#if FUSERANK_HAVE_AVX512_PATH
#include <immintrin.h>
#define FUSERANK_TARGET_AVX512_BF16 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma,f16c")))
#endif

namespace fuserank::engine {
namespace {

// bf16's largest finite value, 0x7F7F0000 (FLT_MAX would round up to infinity).
constexpr float kBf16Max = 3.38953139e38f;

}  // namespace

absl::Status Bf16KernelsAvailable() {
#if FUSERANK_HAVE_AVX512_PATH
  const CpuDispatch& dispatch = GetCpuDispatch();
  if (!CpuSupports(CpuIsa::kAvx512)) {
    return absl::FailedPreconditionError("bf16 needs AVX-512, which this CPU lacks");
  }
  if (!dispatch.avx512_bf16) {
    return absl::FailedPreconditionError(
        "bf16 needs the AVX512_BF16 instructions, which this CPU lacks (fp32 runs everywhere)");
  }
  if (!dispatch.override_value.empty() && dispatch.override_value != "auto" &&
      dispatch.isa < CpuIsa::kAvx512) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bf16 runs on AVX-512, which FUSERANK_CPU_ISA=", dispatch.override_value, " rules out"));
  }
  return absl::OkStatus();
#else
  return absl::FailedPreconditionError("bf16 needs an x86-64 CPU with AVX512_BF16");
#endif
}

uint16_t RoundToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  }
  const float clamped = std::clamp(value, -kBf16Max, kBf16Max);
  std::memcpy(&bits, &clamped, sizeof(bits));
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float Bf16ToFloat(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

PackedMatrixBf16 PackedMatrixBf16::FromPacked(const PackedMatrix& fp32) {
  PackedMatrixBf16 packed;
  packed.k_ = fp32.k();
  packed.n_ = fp32.n();
  const int pairs = packed.pairs();
  const size_t values = static_cast<size_t>(packed.panels()) * pairs * 2 * kSgemmPanel;
  const size_t bytes = std::max<size_t>(64, (values * sizeof(uint16_t) + 63) / 64 * 64);
  packed.data_.reset(static_cast<uint16_t*>(std::aligned_alloc(64, bytes)));
  std::memset(packed.data_.get(), 0, bytes);
  for (int j = 0; j < packed.panels(); ++j) {
    const float* src = fp32.panel(j);
    uint16_t* dst = packed.data_.get() + static_cast<size_t>(j) * pairs * 2 * kSgemmPanel;
    for (int p = 0; p < fp32.k(); ++p) {
      for (int l = 0; l < kSgemmPanel; ++l) {
        dst[(static_cast<size_t>(p / 2) * kSgemmPanel + l) * 2 + p % 2] =
            RoundToBf16(src[static_cast<size_t>(p) * kSgemmPanel + l]);
      }
    }
  }
  return packed;
}

#if FUSERANK_HAVE_AVX512_PATH
namespace {

FUSERANK_TARGET_AVX512_BF16 FUSERANK_INLINE __mmask16 Lanes16(int cols) {
  return cols >= 16 ? static_cast<__mmask16>(0xFFFF)
                    : static_cast<__mmask16>(cols <= 0 ? 0 : (1u << cols) - 1);
}

FUSERANK_TARGET_AVX512_BF16 FUSERANK_INLINE __mmask32 Lanes32(int count) {
  return count >= 32 ? static_cast<__mmask32>(0xFFFFFFFFu)
                     : static_cast<__mmask32>(count <= 0 ? 0 : (1u << count) - 1);
}

FUSERANK_TARGET_AVX512_BF16 FUSERANK_INLINE void Store16(float* out, __m512 v, bool relu,
                                                         __mmask16 mask) {
  if (relu) v = _mm512_maskz_max_ps(0xFFFF, v, _mm512_setzero_ps());
  _mm512_mask_storeu_ps(out, mask, SaturateFinite(v));
}

// Row `a` (k floats) as `pairs` bf16 pairs at `out`, the odd tail's partner 0, values
// clamped to bf16's finite range first.
FUSERANK_TARGET_AVX512_BF16 void RowToBf16(const float* a, int k, int pairs, uint32_t* out) {
  const __m512 hi_limit = _mm512_set1_ps(kBf16Max);
  const __m512 lo_limit = _mm512_set1_ps(-kBf16Max);
  auto* dst = reinterpret_cast<uint16_t*>(out);
  for (int p = 0; p < 2 * pairs; p += 32) {
    __m512 lo = _mm512_maskz_loadu_ps(Lanes16(k - p), a + p);
    __m512 hi = _mm512_maskz_loadu_ps(Lanes16(k - p - 16), a + p + 16);
    lo = _mm512_maskz_max_ps(0xFFFF, _mm512_maskz_min_ps(0xFFFF, lo, hi_limit), lo_limit);
    hi = _mm512_maskz_max_ps(0xFFFF, _mm512_maskz_min_ps(0xFFFF, hi, hi_limit), lo_limit);
    const __m512i packed = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    _mm512_mask_storeu_epi16(dst + p, Lanes32(2 * pairs - p), packed);
  }
}

// MR rows of bf16 pairs (row stride `pairs`) times NP (1 or 2) adjacent panels:
// MR x NP accumulators of 16 fp32 lanes, each dot instruction adding two products per
// lane. Named registers, as in sgemm.cc.
template <int MR, int NP>
FUSERANK_TARGET_AVX512_BF16 void KernelBf16(int pairs, const uint32_t* a, const uint16_t* panel0,
                                            const float* bias, bool relu, float* c, int ldc,
                                            int ncols) {
  const uint16_t* panel1 = panel0 + static_cast<size_t>(pairs) * 2 * kSgemmPanel;
  const __mmask16 mask0 = Lanes16(ncols);
  const __mmask16 mask1 = Lanes16(ncols - kSgemmPanel);
  const __m512 bias0 = bias != nullptr ? _mm512_maskz_loadu_ps(mask0, bias) : _mm512_setzero_ps();
  const __m512 bias1 = bias != nullptr && NP > 1 ? _mm512_maskz_loadu_ps(mask1, bias + kSgemmPanel)
                                                 : _mm512_setzero_ps();
  __m512 c0a = bias0, c0b = bias1, c1a = bias0, c1b = bias1, c2a = bias0, c2b = bias1, c3a = bias0,
         c3b = bias1, c4a = bias0, c4b = bias1, c5a = bias0, c5b = bias1, c6a = bias0, c6b = bias1,
         c7a = bias0, c7b = bias1, c8a = bias0, c8b = bias1, c9a = bias0, c9b = bias1, c10a = bias0,
         c10b = bias1, c11a = bias0, c11b = bias1;
#define FUSERANK_BF16_ROW(r)                                                               \
  if constexpr (MR > r) {                                                                  \
    const __m512bh av =                                                                    \
        reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a[r * pairs + p]))); \
    c##r##a = _mm512_dpbf16_ps(c##r##a, av, b0);                                           \
    if constexpr (NP > 1) c##r##b = _mm512_dpbf16_ps(c##r##b, av, b1);                     \
  }
#pragma GCC unroll 2
  for (int p = 0; p < pairs; ++p) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(
        _mm512_load_si512(panel0 + static_cast<size_t>(p) * 2 * kSgemmPanel));
    const __m512bh b1 = NP > 1 ? reinterpret_cast<__m512bh>(_mm512_load_si512(
                                     panel1 + static_cast<size_t>(p) * 2 * kSgemmPanel))
                               : b0;
    FUSERANK_BF16_ROW(0)
    FUSERANK_BF16_ROW(1)
    FUSERANK_BF16_ROW(2)
    FUSERANK_BF16_ROW(3)
    FUSERANK_BF16_ROW(4)
    FUSERANK_BF16_ROW(5)
    FUSERANK_BF16_ROW(6)
    FUSERANK_BF16_ROW(7)
    FUSERANK_BF16_ROW(8)
    FUSERANK_BF16_ROW(9)
    FUSERANK_BF16_ROW(10)
    FUSERANK_BF16_ROW(11)
  }
#undef FUSERANK_BF16_ROW
#define FUSERANK_BF16_STORE(r)                                              \
  if constexpr (MR > r) {                                                   \
    float* out = c + static_cast<size_t>(r) * ldc;                          \
    Store16(out, c##r##a, relu, mask0);                                     \
    if constexpr (NP > 1) Store16(out + kSgemmPanel, c##r##b, relu, mask1); \
  }
  FUSERANK_BF16_STORE(0)
  FUSERANK_BF16_STORE(1)
  FUSERANK_BF16_STORE(2)
  FUSERANK_BF16_STORE(3)
  FUSERANK_BF16_STORE(4)
  FUSERANK_BF16_STORE(5)
  FUSERANK_BF16_STORE(6)
  FUSERANK_BF16_STORE(7)
  FUSERANK_BF16_STORE(8)
  FUSERANK_BF16_STORE(9)
  FUSERANK_BF16_STORE(10)
  FUSERANK_BF16_STORE(11)
#undef FUSERANK_BF16_STORE
}

constexpr int kRowsBf16 = 12;
using KernelFn = void (*)(int, const uint32_t*, const uint16_t*, const float*, bool, float*, int,
                          int);

template <int NP, int... R>
constexpr std::array<KernelFn, sizeof...(R)> Bf16Kernels(std::integer_sequence<int, R...>) {
  return {&KernelBf16<R + 1, NP>...};
}

constexpr std::array<KernelFn, kRowsBf16> kBf16Kernels1 =
    Bf16Kernels<1>(std::make_integer_sequence<int, kRowsBf16>());
constexpr std::array<KernelFn, kRowsBf16> kBf16Kernels2 =
    Bf16Kernels<2>(std::make_integer_sequence<int, kRowsBf16>());

// A block of rows is rounded to bf16 once, then swept over every panel pair (B streams
// from L2; the block's pairs stay in L1).
void SgemmBf16Avx512(int m, const float* a, int lda, const PackedMatrixBf16& b, const float* bias,
                     bool relu, float* c, int ldc) {
  const int pairs = b.pairs();
  thread_local std::unique_ptr<uint32_t[]> rows_bf16;
  thread_local size_t rows_capacity = 0;
  const size_t needed = static_cast<size_t>(kRowsBf16) * pairs;
  if (rows_capacity < needed) {
    rows_bf16 = std::make_unique<uint32_t[]>(needed);
    rows_capacity = needed;
  }
  const int blocks = (m + kRowsBf16 - 1) / kRowsBf16;
  for (int block = 0, i = 0; block < blocks; ++block) {
    const int rows = (m - i) / (blocks - block);  // near-equal blocks, as in sgemm.cc
    for (int r = 0; r < rows; ++r) {
      RowToBf16(a + static_cast<size_t>(i + r) * lda, b.k(), pairs,
                rows_bf16.get() + static_cast<size_t>(r) * pairs);
    }
    float* ci = c + static_cast<size_t>(i) * ldc;
    for (int j = 0; j < b.panels(); j += 2) {
      const bool pair = j + 1 < b.panels();
      const KernelFn kernel = (pair ? kBf16Kernels2 : kBf16Kernels1)[rows - 1];
      const int col = j * kSgemmPanel;
      kernel(pairs, rows_bf16.get(), b.panel(j), bias != nullptr ? bias + col : nullptr, relu,
             ci + col, ldc, std::min((pair ? 2 : 1) * kSgemmPanel, b.n() - col));
    }
    i += rows;
  }
}

// 12 independent accumulators of dot instructions, 64 FLOPs each.
FUSERANK_TARGET_AVX512_BF16 float Bf16DotLoop(int64_t iterations) {
  // Distinct starting points, or the compiler merges the identical chains into one.
  __m512 c0 = _mm512_set1_ps(1), c1 = _mm512_set1_ps(2), c2 = _mm512_set1_ps(3),
         c3 = _mm512_set1_ps(4), c4 = _mm512_set1_ps(5), c5 = _mm512_set1_ps(6),
         c6 = _mm512_set1_ps(7), c7 = _mm512_set1_ps(8), c8 = _mm512_set1_ps(9),
         c9 = _mm512_set1_ps(10), c10 = _mm512_set1_ps(11), c11 = _mm512_set1_ps(12);
  __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3F803F80));  // (1, 1)
  const __m512bh y = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3A803A80));
  for (int64_t i = 0; i < iterations; ++i) {
    asm volatile("" : "+v"(x));  // keeps the loop from being folded
    c0 = _mm512_dpbf16_ps(c0, x, y);
    c1 = _mm512_dpbf16_ps(c1, x, y);
    c2 = _mm512_dpbf16_ps(c2, x, y);
    c3 = _mm512_dpbf16_ps(c3, x, y);
    c4 = _mm512_dpbf16_ps(c4, x, y);
    c5 = _mm512_dpbf16_ps(c5, x, y);
    c6 = _mm512_dpbf16_ps(c6, x, y);
    c7 = _mm512_dpbf16_ps(c7, x, y);
    c8 = _mm512_dpbf16_ps(c8, x, y);
    c9 = _mm512_dpbf16_ps(c9, x, y);
    c10 = _mm512_dpbf16_ps(c10, x, y);
    c11 = _mm512_dpbf16_ps(c11, x, y);
  }
  const __m512 sum =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                                  _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7))),
                    _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

}  // namespace
#endif  // FUSERANK_HAVE_AVX512_PATH

double MeasureBf16DotGflops(int64_t iterations, int rounds) {
  double best = 0;
#if FUSERANK_HAVE_AVX512_PATH
  using Clock = std::chrono::steady_clock;
  volatile float sink = 0;
  for (int r = 0; r < rounds; ++r) {
    const Clock::time_point start = Clock::now();
    sink = sink + Bf16DotLoop(iterations);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (seconds > 0)
      best = std::max(best, 12.0 * 64.0 * static_cast<double>(iterations) / seconds * 1e-9);
  }
#else
  (void)iterations;
  (void)rounds;
#endif
  return best;
}

void SgemmBf16(int m, const float* a, int lda, const PackedMatrixBf16& b, const float* bias,
               bool relu, float* c, int ldc) {
  if (m <= 0 || b.n() <= 0) return;
#if FUSERANK_HAVE_AVX512_PATH
  SgemmBf16Avx512(m, a, lda, b, bias, relu, c, ldc);
#else
  FUSERANK_CHECK(false) << "SgemmBf16 without an AVX-512 path";
#endif
}

}  // namespace fuserank::engine
