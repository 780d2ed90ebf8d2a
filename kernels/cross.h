// The DCNv2 cross layer's elementwise part, after its cuBLASLt GEMMs have written
// y = U_l (V_l x_l) + b_l (or W_l x_l + b_l): x_{l+1} = x0 * y + x_l, saturated to finite
// values as the CPU engine saturates each layer. One small kernel per layer, captured in
// the batch's CUDA graph with the GEMMs. Launchers compile with the host compiler; the
// caller owns every buffer.
#ifndef FUSERANK_KERNELS_CROSS_H_
#define FUSERANK_KERNELS_CROSS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fuserank::kernels {

struct CrossArgs {
  const float* d_x0 = nullptr;  // [rows, ld]: x0 = concat(V)
  const float* d_y = nullptr;   // [rows, ld]: the layer's GEMM output with its bias
  const float* d_xl = nullptr;  // [rows, ld]: x_l (d_x0 itself for layer 0)
  float* d_out = nullptr;       // [rows, ld]: x_{l+1}; may be d_xl (elementwise in place)
  int ld = 0;                   // row pitch of all four, floats
  int width = 0;                // columns computed per row (d0)
  uint32_t rows = 0;            // size bucket
};

// rows == 0 or width == 0: returns at once. REQUIRES: width <= ld.
cudaError_t LaunchCrossResidual(const CrossArgs& args, cudaStream_t stream);

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_CROSS_H_
