// The classification of CUDA errors into device faults (engine/device_fault.h) and the
// statuses a failed backend answers with. No CUDA here: the numbers are checked against
// the runtime's header where the CUDA code includes it (engine/cuda/cuda_status.h).
#include "engine/device_fault.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

using ::testing::HasSubstr;

TEST(DeviceFaultTest, ContextFatalErrorsAreFaults) {
  for (int code :
       {214, 220, 226, 700, 702, 709, 710, 714, 715, 716, 717, 718, 719, 721, 810, 911}) {
    EXPECT_TRUE(IsContextFatalCudaError(code)) << code;
  }
}

TEST(DeviceFaultTest, RecoverableErrorsAreNot) {
  // success, invalid value, out of memory, not ready, launch out of resources, capture
  // invalidated, graph update failure, unknown.
  for (int code : {0, 1, 2, 600, 701, 901, 910, 999, -1}) {
    EXPECT_FALSE(IsContextFatalCudaError(code)) << code;
  }
}

TEST(DeviceFaultTest, MarkedStatusesAreFaultsAndOthersAreNot) {
  const absl::Status fault =
      MarkDeviceFault(absl::InternalError("sync: cudaErrorIllegalAddress"), 700);
  EXPECT_TRUE(IsDeviceFault(fault));
  EXPECT_EQ(fault.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(fault.message(), "sync: cudaErrorIllegalAddress");
  EXPECT_FALSE(IsDeviceFault(absl::InternalError("cuBLASLt status 13")));
  EXPECT_FALSE(IsDeviceFault(absl::OkStatus()));
}

TEST(DeviceFaultTest, TheFailedStatusNamesTheDeviceAndTheFirstError) {
  const absl::Status failed = DeviceFailedStatus(
      "cuda:1",
      MarkDeviceFault(absl::InternalError("batch on the GPU: cudaErrorLaunchFailure"), 719));
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.message(), HasSubstr("device cuda:1 failed"));
  EXPECT_THAT(failed.message(), HasSubstr("batch on the GPU: cudaErrorLaunchFailure"));
  EXPECT_TRUE(IsDeviceFault(failed));
  EXPECT_EQ(failed.GetPayload(kDeviceFaultPayload).value_or(absl::Cord()), "719");
}

}  // namespace
}  // namespace fuserank::engine
