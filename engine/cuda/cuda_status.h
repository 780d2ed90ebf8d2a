// cudaError_t and cublasStatus_t turned into absl::Status with context, and
// RETURN_IF_CUDA_ERROR for the code that calls the CUDA runtime. Header only.
#ifndef FUSERANK_ENGINE_CUDA_CUDA_STATUS_H_
#define FUSERANK_ENGINE_CUDA_CUDA_STATUS_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/device_fault.h"

namespace fuserank::engine::cuda {

// engine/device_fault.h spells the context-fatal error numbers out without CUDA headers.
static_assert(cuda_error::kEccUncorrectable == cudaErrorECCUncorrectable);
static_assert(cuda_error::kNvlinkUncorrectable == cudaErrorNvlinkUncorrectable);
static_assert(cuda_error::kContained == cudaErrorContained);
static_assert(cuda_error::kIllegalAddress == cudaErrorIllegalAddress);
static_assert(cuda_error::kLaunchTimeout == cudaErrorLaunchTimeout);
static_assert(cuda_error::kContextIsDestroyed == cudaErrorContextIsDestroyed);
static_assert(cuda_error::kAssert == cudaErrorAssert);
static_assert(cuda_error::kHardwareStackError == cudaErrorHardwareStackError);
static_assert(cuda_error::kIllegalInstruction == cudaErrorIllegalInstruction);
static_assert(cuda_error::kMisalignedAddress == cudaErrorMisalignedAddress);
static_assert(cuda_error::kInvalidAddressSpace == cudaErrorInvalidAddressSpace);
static_assert(cuda_error::kInvalidPc == cudaErrorInvalidPc);
static_assert(cuda_error::kLaunchFailure == cudaErrorLaunchFailure);
static_assert(cuda_error::kTensorMemoryLeak == cudaErrorTensorMemoryLeak);
static_assert(cuda_error::kMpsClientTerminated == cudaErrorMpsClientTerminated);
static_assert(cuda_error::kExternalDevice == cudaErrorExternalDevice);

// OK for cudaSuccess; else INTERNAL (RESOURCE_EXHAUSTED for out-of-memory) naming the
// call (`what`) and the runtime's error name and text. An error after which the context
// is unusable (IsContextFatalCudaError) is marked as a device fault (MarkDeviceFault).
inline absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (IsContextFatalCudaError(static_cast<int>(err))) {
    return MarkDeviceFault(absl::InternalError(message), static_cast<int>(err));
  }
  return absl::InternalError(message);
}

inline absl::Status CublasStatus(cublasStatus_t st, absl::string_view what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": cuBLASLt status ", static_cast<int>(st), " (",
                   cublasLtGetStatusName(st), ": ", cublasLtGetStatusString(st), ")");
  if (st == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace fuserank::engine::cuda

// Returns from the enclosing function when a CUDA runtime call fails; `what` names it.
#define RETURN_IF_CUDA_ERROR(expr, what)                                       \
  do {                                                                         \
    const cudaError_t fuserank_cuda_err_ = (expr);                             \
    if (fuserank_cuda_err_ != cudaSuccess) {                                   \
      return ::fuserank::engine::cuda::CudaStatus(fuserank_cuda_err_, (what)); \
    }                                                                          \
  } while (0)

#define RETURN_IF_CUBLAS_ERROR(expr, what)                                        \
  do {                                                                            \
    const cublasStatus_t fuserank_cublas_st_ = (expr);                            \
    if (fuserank_cublas_st_ != CUBLAS_STATUS_SUCCESS) {                           \
      return ::fuserank::engine::cuda::CublasStatus(fuserank_cublas_st_, (what)); \
    }                                                                             \
  } while (0)

#endif  // FUSERANK_ENGINE_CUDA_CUDA_STATUS_H_
