// Helpers of the GPU tests: the skip when no CUDA device is usable (with the reason),
// device buffers filled from host vectors or poisoned with NaN bits, and the comparison
// of one request's top-K lists under the score tolerance. Not thread-safe.
#ifndef FUSERANK_TESTS_KERNELS_GPU_TEST_UTIL_H_
#define FUSERANK_TESTS_KERNELS_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/batch.h"
#include "engine/cuda/device_memory.h"
#include "gtest/gtest.h"

namespace fuserank::engine::cuda::gpu_test {

// Empty when a CUDA device is usable; else why not (driver error, no device).
// Makes no other CUDA call before the device count says there is a device.
std::string NoGpuReason();

// Why a GPU test that would skip must fail instead ("" when it may skip): a run cannot
// pass while testing nothing where a GPU is there. "FUSERANK_REQUIRE_GPU=1" when that is
// set (bench/gpu/check.sh sets it on the GPU machine); else, unless FUSERANK_REQUIRE_GPU=0,
// evidence of a GPU that the CUDA runtime cannot use (a driver/runtime mismatch, a wrong
// CUDA_VISIBLE_DEVICES): /dev/nvidiactl exists, or `nvidia-smi -L` lists a GPU. Checked
// once per process.
std::string GpuRequiredReason();

// Skips the current test without a usable GPU, saying why; fails it instead, saying why,
// when GpuRequiredReason() is not empty. (Only CudaBackendTest.WithoutAGpuCreationSaysWhy,
// which checks the behaviour without a GPU, skips on a GPU machine.)
#define FUSERANK_SKIP_WITHOUT_GPU()                                                         \
  do {                                                                                      \
    const std::string fuserank_no_gpu_ = ::fuserank::engine::cuda::gpu_test::NoGpuReason(); \
    if (!fuserank_no_gpu_.empty()) {                                                        \
      const std::string fuserank_required_ =                                                \
          ::fuserank::engine::cuda::gpu_test::GpuRequiredReason();                          \
      if (!fuserank_required_.empty()) {                                                    \
        GTEST_FAIL() << fuserank_required_ << " but no CUDA device: " << fuserank_no_gpu_;  \
      }                                                                                     \
      GTEST_SKIP() << "no CUDA device: " << fuserank_no_gpu_;                               \
    }                                                                                       \
  } while (0)

// Points FUSERANK_CUDA_MODULE at this build's module when it is not set and the build
// path exists (a bundle copied elsewhere finds it next to the executable instead).
void UseBuiltModule();

// A device copy of `v` (ASSERTs on failure: call through ASSERT_NO_FATAL_FAILURE).
template <typename T>
DeviceBuffer Upload(const std::vector<T>& v) {
  auto buffer = DeviceBuffer::Allocate(v.size() * sizeof(T) + 16, "test upload");
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  if (!buffer.ok()) return DeviceBuffer();
  EXPECT_EQ(cudaMemcpy(buffer->get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return *std::move(buffer);
}

// `bytes` of device memory with every byte 0xFF (a NaN in every float, ~0 in every
// integer), so anything a kernel fails to write shows up.
DeviceBuffer Poisoned(size_t bytes);

template <typename T>
std::vector<T> Download(const DeviceBuffer& buffer, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), buffer.get(), n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// True when the float's bits are the poison pattern (never written).
bool IsPoison(float f);

// Checks one request's top-K from the backend under test against the expected list:
// same length; scores within `tolerance` position by position; an index may differ from
// the expected one only where the two candidates' expected scores are within tolerance
// (a near tie that rounding may swap); the list is ordered by (score desc, index asc)
// and has no repeated index. `score_of[i]` is the expected score of candidate i.
void ExpectSameTopK(const ScoredIndex* got, const ScoredIndex* want, size_t k,
                    const std::vector<float>& score_of, double tolerance, const std::string& what);

}  // namespace fuserank::engine::cuda::gpu_test

#endif  // FUSERANK_TESTS_KERNELS_GPU_TEST_UTIL_H_
