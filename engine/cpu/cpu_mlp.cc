#include "engine/cpu/cpu_mlp.h"

#include <cmath>
#include <cstddef>

#include "engine/cpu/cpu_saturate.h"
#include "engine/cpu/cpu_simd.h"

namespace fuserank::engine {

PackedLayer PackLayer(const DenseLayer& layer, bool relu, const std::vector<int>* columns,
                      bool with_bias) {
  PackedLayer packed;
  packed.in = columns != nullptr ? static_cast<int>(columns->size()) : layer.in;
  packed.out = layer.out;
  packed.relu = relu;
  packed.weight = PackedMatrix::FromTransposed(layer.weight.data(), layer.out, packed.in, layer.in,
                                               columns != nullptr ? columns->data() : nullptr);
  packed.bias = with_bias ? layer.bias : std::vector<float>(layer.out, 0.0f);
  return packed;
}

void LayerForward(const PackedLayer& layer, int rows, const float* x, int x_stride, float* y,
                  int y_stride, const float* bias) {
  if (!layer.weight_bf16.empty()) {
    SgemmBf16(rows, x, x_stride, layer.weight_bf16, bias != nullptr ? bias : layer.bias.data(),
              layer.relu, y, y_stride);
    return;
  }
  SgemmPacked(rows, x, x_stride, layer.weight, bias != nullptr ? bias : layer.bias.data(),
              layer.relu, y, y_stride);
}

void CrossLayerForward(const PackedLayer& layer, int rows, const float* x, int x_stride,
                       const CrossEpilogue& cross, float* y, int y_stride) {
  SgemmPacked(rows, x, x_stride, layer.weight, layer.bias.data(), /*relu=*/false, y, y_stride,
              &cross);
}

void Sigmoid(const float* x, int n, int x_stride, float* out) {
  for (int i = 0; i < n; ++i) {
    out[i] = 1.0f / (1.0f + std::exp(-x[static_cast<size_t>(i) * x_stride]));
  }
}

namespace {

// Vectorizes at the width of the function it is inlined into.
FUSERANK_INLINE void SaturateRows(float* x, int rows, int width, int stride) {
  for (int r = 0; r < rows; ++r) {
    float* row = x + static_cast<size_t>(r) * stride;
    for (int i = 0; i < width; ++i) row[i] = SaturateFinite(row[i]);
  }
}

#if FUSERANK_HAVE_AVX512_PATH
FUSERANK_TARGET_AVX512 void SaturateAvx512(float* x, int rows, int width, int stride) {
  SaturateRows(x, rows, width, stride);
}
#endif
#if FUSERANK_HAVE_AVX2_PATH
FUSERANK_TARGET_AVX2 void SaturateAvx2(float* x, int rows, int width, int stride) {
  SaturateRows(x, rows, width, stride);
}
#endif

}  // namespace

void SaturateNonFinite(float* x, int rows, int width, int stride) {
  // Every layer's output passes here: at the baseline's 4 lanes it cost several percent
  // of the MLP stage.
  switch (ActiveCpuIsa()) {
#if FUSERANK_HAVE_AVX512_PATH
    case CpuIsa::kAvx512:
      SaturateAvx512(x, rows, width, stride);
      return;
#endif
#if FUSERANK_HAVE_AVX2_PATH
    case CpuIsa::kAvx2:
      SaturateAvx2(x, rows, width, stride);
      return;
#endif
    default:
      SaturateRows(x, rows, width, stride);
  }
}

}  // namespace fuserank::engine
