// Whether a GPU is usable by this module, and if not, why: the device count (no driver,
// no device), the ordinal, the compute capability, and a probe kernel that proves the
// module's device code runs there. Makes no CUDA call that needs a device before the
// device count says there is one. Thread-safe.
#ifndef FUSERANK_ENGINE_CUDA_CUDA_PROBE_H_
#define FUSERANK_ENGINE_CUDA_CUDA_PROBE_H_

#include <string>

#include "absl/status/statusor.h"

namespace fuserank::engine::cuda {

// OK with a one-line description ("NVIDIA H200, sm_90, 132 SMs, 140 GiB") when device
// `gpu` is usable; FAILED_PRECONDITION saying why otherwise. Leaves `gpu` current.
absl::StatusOr<std::string> ProbeCudaDevice(int gpu);

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_CUDA_PROBE_H_
