#include "engine/cuda/cuda_probe.h"

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cuda/device_memory.h"
#include "engine/status_macros.h"
#include "kernels/probe.h"

namespace fuserank::engine::cuda {
namespace {

absl::Status Unusable(absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat("no usable CUDA device: ", why));
}

std::string ErrorText(cudaError_t err) {
  return absl::StrCat(cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
}

}  // namespace

absl::StatusOr<std::string> ProbeCudaDevice(int gpu) {
  int count = 0;  // left unwritten when there is no driver
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return Unusable(absl::StrCat("cudaGetDeviceCount: ", ErrorText(err)));
  if (count <= 0) return Unusable("cudaGetDeviceCount found no device");
  if (gpu < 0 || gpu >= count) {
    return Unusable(absl::StrCat("engine.gpu is ", gpu, " but there are ", count, " devices"));
  }
  if (const cudaError_t e = cudaSetDevice(gpu); e != cudaSuccess) {
    return Unusable(absl::StrCat("cudaSetDevice(", gpu, "): ", ErrorText(e)));
  }
  cudaDeviceProp prop = {};
  if (const cudaError_t e = cudaGetDeviceProperties(&prop, gpu); e != cudaSuccess) {
    return Unusable(absl::StrCat("cudaGetDeviceProperties: ", ErrorText(e)));
  }
  if (prop.major < 8) {
    return Unusable(absl::StrCat(prop.name, " has compute capability ", prop.major, ".", prop.minor,
                                 "; the module needs 8.0 or newer"));
  }
  // Device code must actually run here (a missing architecture fails now, not later).
  absl::StatusOr<DeviceBuffer> probe = DeviceBuffer::Allocate(sizeof(uint32_t), "probe");
  if (!probe.ok()) return Unusable(probe.status().message());
  uint32_t value = 0;
  cudaError_t e = kernels::LaunchProbe(probe->get<uint32_t>(), nullptr);
  if (e == cudaSuccess) {
    e = cudaMemcpy(&value, probe->get(), sizeof(value), cudaMemcpyDeviceToHost);
  }
  if (e != cudaSuccess || value != kernels::kProbeValue) {
    return Unusable(absl::StrCat("the probe kernel did not run on ", prop.name, ": ",
                                 e != cudaSuccess ? ErrorText(e) : "wrong value"));
  }
  return absl::StrFormat("%s, sm_%d%d, %d SMs, %.0f GiB", prop.name, prop.major, prop.minor,
                         prop.multiProcessorCount,
                         static_cast<double>(prop.totalGlobalMem) / (1ull << 30));
}

}  // namespace fuserank::engine::cuda
