// The CPU engine's MLP stage: fully connected layers with their weights packed once for
// SgemmPacked, and the final sigmoid. Also the reference for the CUDA MLP.
// A PackedLayer is immutable after packing and shared read-only by all threads.
#ifndef FUSERANK_ENGINE_CPU_CPU_MLP_H_
#define FUSERANK_ENGINE_CPU_CPU_MLP_H_

#include <vector>

#include "engine/cpu/sgemm.h"
#include "engine/cpu/sgemm_bf16.h"
#include "engine/model.h"

namespace fuserank::engine {

struct PackedLayer {
  int in = 0;  // inputs used (columns picked from the source layer)
  int out = 0;
  bool relu = false;
  PackedMatrix weight;      // in x out
  std::vector<float> bias;  // out
  // engine.cpu_precision: bf16: the weight's bf16 copy, which LayerForward then uses
  // (empty: fp32).
  PackedMatrixBf16 weight_bf16;
};

// Packs `layer` (weight [out, in], PyTorch layout). `columns`, when given, lists the
// input columns kept, in the order the packed layer reads them (in = columns.size());
// `with_bias` false leaves a zero bias (for a partial product added to another).
PackedLayer PackLayer(const DenseLayer& layer, bool relu, const std::vector<int>* columns = nullptr,
                      bool with_bias = true);

// y[r] = act(W x[r] + b) for r in [0, rows): x row r at x + r * x_stride (in floats),
// y row r at y + r * y_stride (out floats), stored saturated (SaturateNonFinite's rule,
// applied by the GEMM as it stores y). `bias`, when not null, replaces the layer's own
// bias (a per-request bias that already holds the layer's).
void LayerForward(const PackedLayer& layer, int rows, const float* x, int x_stride, float* y,
                  int y_stride, const float* bias = nullptr);

// The DCNv2 form of LayerForward: y[r] = x0[r] * (W x[r] + b) + xl[r], the product, the
// residual and the saturation applied as the GEMM stores y (cross.xl may be y itself).
// REQUIRES: !layer.relu.
void CrossLayerForward(const PackedLayer& layer, int rows, const float* x, int x_stride,
                       const CrossEpilogue& cross, float* y, int y_stride);

// out[i] = 1 / (1 + exp(-x[i * x_stride])) for i in [0, n).
void Sigmoid(const float* x, int n, int x_stride, float* out);

// Makes `rows` rows of `width` floats (row r at x + r * stride) finite: +-Inf becomes
// +-FLT_MAX and NaN becomes 0. The CPU engine applies it after every stage (pooling, the
// interaction, each layer), so that float overflow on extreme but finite inputs (huge
// weights in a mean bag, huge dense values) saturates instead of turning into NaN, and
// every score is a number in [0, 1]. Finite values pass unchanged, bit for bit. The GEMM
// of every layer applies the same rule as it stores (cpu_saturate.h), so layer outputs
// need no pass of this.
void SaturateNonFinite(float* x, int rows, int width, int stride);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_MLP_H_
