// Device faults: errors after which a backend's device cannot run anything again in this
// process (a kernel that touched an illegal address, an uncorrectable ECC error, ...).
// The CUDA backend marks the status of such an error (MarkDeviceFault) and then fails
// every later batch at once; the server reacts as engine.on_device_failure says.
// No CUDA header: the CUDA runtime's error numbers are spelled out here and checked
// against cuda_runtime_api.h where the CUDA code includes this (engine/cuda/cuda_status.h).
// Header only: the server and the CUDA module both use it.
#ifndef FUSERANK_ENGINE_DEVICE_FAULT_H_
#define FUSERANK_ENGINE_DEVICE_FAULT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fuserank::engine {

// cudaError_t numbers (CUDA runtime, driver_types.h) of the errors that leave the CUDA
// context unusable: the runtime documents each of these as "the process must be terminated
// and relaunched", or (ECC, NVLink, a destroyed context) the device's memory or context
// can no longer be trusted.
namespace cuda_error {
inline constexpr int kEccUncorrectable = 214;
inline constexpr int kNvlinkUncorrectable = 220;
inline constexpr int kContained = 226;
inline constexpr int kIllegalAddress = 700;
inline constexpr int kLaunchTimeout = 702;
inline constexpr int kContextIsDestroyed = 709;
inline constexpr int kAssert = 710;
inline constexpr int kHardwareStackError = 714;
inline constexpr int kIllegalInstruction = 715;
inline constexpr int kMisalignedAddress = 716;
inline constexpr int kInvalidAddressSpace = 717;
inline constexpr int kInvalidPc = 718;
inline constexpr int kLaunchFailure = 719;
inline constexpr int kTensorMemoryLeak = 721;
inline constexpr int kMpsClientTerminated = 810;
inline constexpr int kExternalDevice = 911;
}  // namespace cuda_error

// True for a cudaError_t number after which the context is unusable (the list above).
// Out of memory, invalid arguments, a failed graph capture and the like are not: the
// device still runs other work.
constexpr bool IsContextFatalCudaError(int code) {
  switch (code) {
    case cuda_error::kEccUncorrectable:
    case cuda_error::kNvlinkUncorrectable:
    case cuda_error::kContained:
    case cuda_error::kIllegalAddress:
    case cuda_error::kLaunchTimeout:
    case cuda_error::kContextIsDestroyed:
    case cuda_error::kAssert:
    case cuda_error::kHardwareStackError:
    case cuda_error::kIllegalInstruction:
    case cuda_error::kMisalignedAddress:
    case cuda_error::kInvalidAddressSpace:
    case cuda_error::kInvalidPc:
    case cuda_error::kLaunchFailure:
    case cuda_error::kTensorMemoryLeak:
    case cuda_error::kMpsClientTerminated:
    case cuda_error::kExternalDevice:
      return true;
    default:
      return false;
  }
}

// The payload that marks a status as a device fault (its value: the error's number).
inline constexpr char kDeviceFaultPayload[] = "type.fuserank.dev/device-fault";

// `status` (not OK) marked as a device fault of error number `code`.
inline absl::Status MarkDeviceFault(absl::Status status, int code) {
  status.SetPayload(kDeviceFaultPayload, absl::Cord(absl::StrCat(code)));
  return status;
}

inline bool IsDeviceFault(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kDeviceFaultPayload).has_value();
}

// What a failed backend answers for every batch from its first fault on: UNAVAILABLE
// naming the device and that first error (marked as a device fault too).
inline absl::Status DeviceFailedStatus(absl::string_view device, const absl::Status& first) {
  absl::Status failed = absl::UnavailableError(absl::StrCat(
      "device ", device, " failed and runs nothing more in this process: ", first.message(),
      "; restart the server (or replace the GPU)"));
  failed.SetPayload(kDeviceFaultPayload,
                    first.GetPayload(kDeviceFaultPayload).value_or(absl::Cord("0")));
  return failed;
}

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_DEVICE_FAULT_H_
