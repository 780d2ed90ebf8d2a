// The engine's rule for non-finite values (+-Inf as +-FLT_MAX, NaN as 0, finite bits kept)
// in each of its forms: the scalar and vector SaturateFinite (cpu_saturate.h), the
// SaturateNonFinite pass on each ISA path, and the sgemm epilogues that apply it as they
// store (plain, ReLU, the cross epilogue, the one-column GEMV, bf16), bit for bit.
#include "engine/cpu/cpu_saturate.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_mlp.h"
#include "engine/cpu/cpu_simd.h"
#include "engine/cpu/sgemm.h"
#include "engine/cpu/sgemm_bf16.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/on_isa_test_util.h"

namespace fuserank::engine {
namespace {

uint32_t Bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

float FromBits(uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof(v));
  return v;
}

// Every class of float: signed zeros, denormals, normals, the largest finite values,
// infinities and NaNs of both signs (quiet, signalling, with payloads).
std::vector<float> SpecialValues() {
  return {0.0f,
          -0.0f,
          1e-45f,
          -1e-45f,
          FLT_MIN,
          1.5f,
          -7.25f,
          FLT_MAX,
          -FLT_MAX,
          std::nextafter(FLT_MAX, 0.0f),
          INFINITY,
          -INFINITY,
          std::numeric_limits<float>::quiet_NaN(),
          -std::numeric_limits<float>::quiet_NaN(),
          FromBits(0x7F800001u),  // signalling NaN
          FromBits(0xFFC12345u),  // negative NaN with a payload
          3.0e38f,
          -123456.789f};
}

// What the rule says of v, written out case by case.
uint32_t WantBits(float v) {
  if (std::isnan(v)) return Bits(0.0f);
  if (std::isinf(v)) return Bits(v > 0 ? FLT_MAX : -FLT_MAX);
  return Bits(v);
}

#if FUSERANK_HAVE_AVX512_PATH
FUSERANK_TARGET_AVX512 void Saturate512(const float* in, float* out) {
  _mm512_storeu_ps(out, SaturateFinite(_mm512_loadu_ps(in)));
}
#endif
#if FUSERANK_HAVE_AVX2_PATH
FUSERANK_TARGET_AVX2 void Saturate256(const float* in, float* out) {
  _mm256_storeu_ps(out, SaturateFinite(_mm256_loadu_ps(in)));
}
#endif

// One vector of kLanes floats from `in` through `form`, each lane against the rule.
template <int kLanes>
void ExpectVectorForm(void (*form)(const float*, float*), const float* in, const char* name) {
  float out[kLanes];
  form(in, out);
  for (int l = 0; l < kLanes; ++l) {
    EXPECT_EQ(Bits(out[l]), WantBits(in[l])) << name << " lane " << l << " bits " << Bits(in[l]);
  }
}

TEST(SaturateFiniteTest, EveryFormFollowsTheRuleBitForBit) {
  const std::vector<float> values = SpecialValues();
  for (float v : values) {
    EXPECT_EQ(Bits(SaturateFinite(v)), WantBits(v)) << "scalar, input bits " << Bits(v);
  }
  // The vector forms on 16-lane windows of the list, each value in every lane position.
  std::vector<float> lanes(values.size() + 16);
  for (size_t i = 0; i < lanes.size(); ++i) lanes[i] = values[i % values.size()];
  for (size_t start = 0; start < values.size(); ++start) {
    const float* in = lanes.data() + start;
#if FUSERANK_HAVE_AVX512_PATH
    if (CpuSupports(CpuIsa::kAvx512)) ExpectVectorForm<16>(Saturate512, in, "avx512");
#endif
#if FUSERANK_HAVE_AVX2_PATH
    if (CpuSupports(CpuIsa::kAvx2)) ExpectVectorForm<8>(Saturate256, in, "avx2");
#endif
  }
}

using SaturateNonFiniteOnIsaTest = test::OnIsaTest<CpuIsa>;

// Rows of 37 at a stride of 40 (a full vector, a partial one and lanes past the width).
TEST_P(SaturateNonFiniteOnIsaTest, FollowsTheRuleAndTouchesOnlyTheRows) {
  const std::vector<float> values = SpecialValues();
  constexpr int kRows = 3, kWidth = 37, kStride = 40;
  std::vector<float> x(kRows * kStride);
  for (size_t i = 0; i < x.size(); ++i) x[i] = values[(i * 7) % values.size()];
  const std::vector<float> before = x;
  SaturateNonFinite(x.data(), kRows, kWidth, kStride);
  for (int i = 0; i < kRows * kStride; ++i) {
    const uint32_t want = i % kStride < kWidth ? WantBits(before[i]) : Bits(before[i]);
    ASSERT_EQ(Bits(x[i]), want) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, SaturateNonFiniteOnIsaTest,
                         testing::Values(CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512),
                         [](const auto& info) { return std::string(CpuIsaName(info.param)); });

// One-term products (k = 1), so that every output is exact or overflows whichever way a
// path rounds (one FMA, or a product then a sum): c[i][j] = bias[j] + a[i] * w[j], whose
// float value the test works out in double. A holds NaN and infinity too (a NaN from the
// product of infinity and 0 included), although the engine never feeds them.
struct OneTermGemm {
  std::vector<float> a = {FLT_MAX, -FLT_MAX, 1.5f,     -0.0f,
                          0.0f,    2.0f,     INFINITY, std::numeric_limits<float>::quiet_NaN(),
                          0.5f,    -3.0f,    1.0f};
  std::vector<float> w;
  std::vector<float> bias;
  int n = 0;

  explicit OneTermGemm(int columns) : n(columns) {
    const float ws[] = {4.0f, -4.0f, 2.0f, 1.0f, 0.0f, -1.0f, 0.5f};
    const float bs[] = {0.0f, -0.0f, 0.25f, FLT_MAX, -FLT_MAX, 1.0f, -2.0f, 3.0e38f};
    for (int j = 0; j < n; ++j) {
      w.push_back(ws[j % 7]);
      bias.push_back(bs[j % 8]);
    }
  }
  int m() const { return static_cast<int>(a.size()); }
  // The product before the epilogue, rounded to float once.
  float Raw(int i, int j) const {
    return static_cast<float>(static_cast<double>(bias[j]) +
                              static_cast<double>(a[i]) * static_cast<double>(w[j]));
  }
};

// With n = 1 the AVX-512 path runs the GEMV; 33 covers two panels and a masked third.
using SgemmSaturatesTest = test::OnIsaTest<std::tuple<int /*n*/, CpuIsa>>;

TEST_P(SgemmSaturatesTest, PlainAndReluStoreTheRule) {
  const OneTermGemm g(std::get<0>(GetParam()));
  const PackedMatrix packed = PackedMatrix::FromTransposed(g.w.data(), g.n, 1, 1);
  const int ldc = g.n + 2;
  for (bool relu : {false, true}) {
    std::vector<float> c(static_cast<size_t>(g.m()) * ldc, -1.0f);
    SgemmPacked(g.m(), g.a.data(), 1, packed, g.bias.data(), relu, c.data(), ldc);
    for (int i = 0; i < g.m(); ++i) {
      for (int j = 0; j < g.n; ++j) {
        const float raw = g.Raw(i, j);
        const float got = c[i * ldc + j];
        if (relu && raw == 0.0f) {  // ReLU of -0 keeps its sign on some paths: either zero
          ASSERT_EQ(got, 0.0f) << "i=" << i << " j=" << j;
          continue;
        }
        // ReLU first (a NaN stays NaN or becomes 0 by path; the rule zeroes it either way).
        const float act = relu && raw < 0.0f ? 0.0f : raw;
        ASSERT_EQ(Bits(got), WantBits(act))
            << "relu=" << relu << " i=" << i << " j=" << j << " raw=" << raw;
      }
      for (int j = g.n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], -1.0f) << "wrote past n";
    }
  }
}

TEST_P(SgemmSaturatesTest, CrossEpilogueStoresTheRule) {
  const OneTermGemm g(std::get<0>(GetParam()));
  const PackedMatrix packed = PackedMatrix::FromTransposed(g.w.data(), g.n, 1, 1);
  const int ld = g.n + 3;
  // x0 finite (the engine's are saturated); xl in {0, -0, 1} keeps every result exact or
  // overflowing whether the path fuses x0 * raw + xl or not.
  std::vector<float> x0(static_cast<size_t>(g.m()) * ld), xl(x0.size());
  const float x0s[] = {1.0f, FLT_MAX, -FLT_MAX, 2.0f, -0.5f};
  const float xls[] = {0.0f, -0.0f, 1.0f};
  for (size_t e = 0; e < x0.size(); ++e) {
    x0[e] = x0s[e % 5];
    xl[e] = xls[e % 3];
  }
  std::vector<float> c(x0.size(), -1.0f);
  const CrossEpilogue cross{x0.data(), ld, xl.data(), ld};
  SgemmPacked(g.m(), g.a.data(), 1, packed, g.bias.data(), /*relu=*/false, c.data(), ld, &cross);
  for (int i = 0; i < g.m(); ++i) {
    for (int j = 0; j < g.n; ++j) {
      const size_t e = static_cast<size_t>(i) * ld + j;
      const float raw = g.Raw(i, j);
      const float want = static_cast<float>(static_cast<double>(x0[e]) * raw + xl[e]);
      ASSERT_EQ(Bits(c[e]), WantBits(want)) << "i=" << i << " j=" << j << " raw=" << raw;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, SgemmSaturatesTest,
                         testing::Combine(testing::Values(1, 33),
                                          testing::Values(CpuIsa::kGeneric, CpuIsa::kAvx2,
                                                          CpuIsa::kAvx512)),
                         [](const auto& info) {
                           return absl::StrCat(CpuIsaName(std::get<1>(info.param)), "_n",
                                               std::get<0>(info.param));
                         });

// bf16 rounds A (and B) to bf16 first, clamping to bf16's largest finite value: the
// products of finite inputs cannot overflow there, so the sums are made to (FLT_MAX-sized
// terms of one sign).
TEST(SgemmBf16SaturatesTest, OverflowAndNanStoreTheRule) {
  if (!Bf16KernelsAvailable().ok()) GTEST_SKIP() << Bf16KernelsAvailable().message();
  const int k = 4, n = 33;
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (int j = 0; j < n; ++j) {
    for (int p = 0; p < k; ++p) w[j * k + p] = j % 3 == 0 ? 1.0f : (j % 3 == 1 ? -1.0f : 0.5f);
  }
  const PackedMatrixBf16 packed =
      PackedMatrixBf16::FromPacked(PackedMatrix::FromTransposed(w.data(), n, k, k));
  const std::vector<float> a = {FLT_MAX,  FLT_MAX,  FLT_MAX,  FLT_MAX,   // sums overflow
                                -FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX,  // the other way
                                1.0f,     2.0f,     -0.5f,    0.25f};    // finite, exact
  const int m = 3;
  for (bool relu : {false, true}) {
    std::vector<float> c(static_cast<size_t>(m) * n, -1.0f);
    SgemmBf16(m, a.data(), k, packed, nullptr, relu, c.data(), n);
    for (int j = 0; j < n; ++j) {
      const float scale = w[j * k];
      const float big = scale > 0 ? FLT_MAX : -FLT_MAX;
      // 4 x bf16 max x 0.5 is still past FLT_MAX.
      EXPECT_EQ(Bits(c[j]), Bits(relu && big < 0 ? 0.0f : big)) << "relu=" << relu << " j=" << j;
      EXPECT_EQ(Bits(c[n + j]), Bits(relu && big > 0 ? 0.0f : -big))
          << "relu=" << relu << " j=" << j;
      const float exact = 2.75f * scale;
      EXPECT_EQ(c[2 * n + j], relu && exact < 0 ? 0.0f : exact) << "relu=" << relu << " j=" << j;
    }
  }
}

}  // namespace
}  // namespace fuserank::engine
