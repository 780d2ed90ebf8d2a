// A one-thread kernel that proves the module's device code runs on the current GPU (a
// missing architecture shows up here as "no kernel image", not in the first batch).
#ifndef FUSERANK_KERNELS_PROBE_H_
#define FUSERANK_KERNELS_PROBE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fuserank::kernels {

inline constexpr uint32_t kProbeValue = 0x46524b31;  // "FRK1"

// Writes kProbeValue to *d_out.
cudaError_t LaunchProbe(uint32_t* d_out, cudaStream_t stream);

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_PROBE_H_
