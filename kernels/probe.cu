#include "kernels/launch_error.h"
#include "kernels/probe.h"

namespace fuserank::kernels {
namespace {

__global__ void ProbeKernel(uint32_t* out) { *out = kProbeValue; }

}  // namespace

cudaError_t LaunchProbe(uint32_t* d_out, cudaStream_t stream) {
  if (d_out == nullptr) return cudaErrorInvalidValue;
  ClearStaleLaunchError();
  ProbeKernel<<<1, 1, 0, stream>>>(d_out);
  return cudaGetLastError();
}

}  // namespace fuserank::kernels
