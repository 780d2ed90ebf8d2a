// Device faults on the CUDA side: CudaStatus marks the context-fatal errors
// (engine/device_fault.h) and no other, without a GPU; on a GPU, the backend loaded the
// way the server loads it reports health() OK after its batches, and a batch error that
// is no device fault leaves it healthy and scoring.
#include "engine/cuda/cuda_status.h"

#include <cuda_runtime_api.h>

#include <memory>

#include "engine/backend_factory.h"
#include "engine/device_fault.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine::cuda {
namespace {

using ::testing::HasSubstr;

TEST(CudaStatusTest, ContextFatalErrorsAreMarkedAsDeviceFaults) {
  for (cudaError_t err :
       {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorECCUncorrectable,
        cudaErrorIllegalInstruction, cudaErrorMisalignedAddress, cudaErrorHardwareStackError}) {
    const absl::Status status = CudaStatus(err, "batch on the GPU");
    EXPECT_TRUE(IsDeviceFault(status)) << status;
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(status.message(), HasSubstr(cudaGetErrorName(err)));
  }
}

TEST(CudaStatusTest, OtherErrorsAreNot) {
  for (cudaError_t err : {cudaErrorInvalidValue, cudaErrorMemoryAllocation, cudaErrorNotReady,
                          cudaErrorLaunchOutOfResources, cudaErrorStreamCaptureInvalidated}) {
    EXPECT_FALSE(IsDeviceFault(CudaStatus(err, "call"))) << cudaGetErrorName(err);
  }
  EXPECT_EQ(CudaStatus(cudaErrorMemoryAllocation, "call").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(CudaStatus(cudaSuccess, "call").ok());
}

TEST(CudaStatusTest, AHealthyBackendStaysHealthyThroughABatchError) {
  FUSERANK_SKIP_WITHOUT_GPU();
  gpu_test::UseBuiltModule();
  test::BatchFixture s =
      test::MakeBatchFixture(fuserank::testing::SmallSpec(2, 2, 100, 8), 23, {4, 9});
  ASSERT_NE(s.model, nullptr);
  BackendOptions options;
  options.workers = 1;
  auto gpu = CreateBackend(s.model, DeviceChoice::kCuda, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  BatchResult result;
  ASSERT_TRUE((*gpu)->Run(0, s.batch, &result).ok());
  EXPECT_TRUE((*gpu)->health().ok()) << (*gpu)->health();
  const absl::Status no_worker = (*gpu)->Run(5, s.batch, &result);
  EXPECT_EQ(no_worker.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsDeviceFault(no_worker));
  EXPECT_TRUE((*gpu)->health().ok()) << (*gpu)->health();
  EXPECT_TRUE((*gpu)->Run(0, s.batch, &result).ok());
}

}  // namespace
}  // namespace fuserank::engine::cuda
