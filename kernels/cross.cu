// x_{l+1} = x0 * y + x_l over [rows, width] with a grid-stride loop: memory bound, one
// read of each operand and one write, coalesced along the row.
#include <cstdint>

#include "kernels/cross.h"
#include "kernels/launch_error.h"
#include "kernels/saturate.h"

namespace fuserank::kernels {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = 1u << 16;

__global__ void CrossResidualKernel(const float* __restrict__ x0, const float* __restrict__ y,
                                    const float* xl, float* out, int ld, int width,
                                    uint64_t total) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < total;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = i / width;
    const uint64_t at = r * ld + (i - r * width);
    out[at] = SaturateFinite(fmaf(x0[at], y[at], xl[at]));
  }
}

}  // namespace

cudaError_t LaunchCrossResidual(const CrossArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.width <= 0) return cudaSuccess;
  if (a.width > a.ld) return cudaErrorInvalidValue;
  const uint64_t total = uint64_t{a.rows} * a.width;
  uint64_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  ClearStaleLaunchError();
  CrossResidualKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      a.d_x0, a.d_y, a.d_xl, a.d_out, a.ld, a.width, total);
  return cudaGetLastError();
}

}  // namespace fuserank::kernels
