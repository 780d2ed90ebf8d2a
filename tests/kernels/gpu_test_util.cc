#include "tests/kernels/gpu_test_util.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"

namespace fuserank::engine::cuda::gpu_test {

std::string NoGpuReason() {
  int count = 0;  // left unwritten without a driver
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorName(err), " (",
                        cudaGetErrorString(err), ")");
  }
  if (count == 0) return "cudaGetDeviceCount found no device";
  return "";
}

bool GpuRequired() {
  const char* required = std::getenv("FUSERANK_REQUIRE_GPU");
  return required != nullptr && std::string(required) == "1";
}

void UseBuiltModule() {
#ifdef FUSERANK_CUDA_MODULE
  if (std::getenv("FUSERANK_CUDA_MODULE") == nullptr &&
      std::filesystem::exists(FUSERANK_CUDA_MODULE)) {
    setenv("FUSERANK_CUDA_MODULE", FUSERANK_CUDA_MODULE, 0);
  }
#endif
}

DeviceBuffer Poisoned(size_t bytes) {
  auto buffer = DeviceBuffer::Allocate(bytes, "poisoned output");
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  if (!buffer.ok()) return DeviceBuffer();
  EXPECT_EQ(cudaMemset(buffer->get(), 0xFF, bytes), cudaSuccess);
  return *std::move(buffer);
}

bool IsPoison(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits == 0xFFFFFFFFu;
}

void ExpectSameTopK(const ScoredIndex* got, const ScoredIndex* want, size_t k,
                    const std::vector<float>& score_of, double tolerance, const std::string& what) {
  std::set<uint32_t> seen;
  for (size_t p = 0; p < k; ++p) {
    SCOPED_TRACE(absl::StrCat(what, ", rank ", p));
    ASSERT_LT(got[p].index, score_of.size());
    EXPECT_TRUE(seen.insert(got[p].index).second) << "index " << got[p].index << " repeated";
    EXPECT_NEAR(got[p].score, want[p].score, tolerance);
    if (got[p].index != want[p].index) {
      EXPECT_NEAR(score_of[got[p].index], score_of[want[p].index], tolerance)
          << "got index " << got[p].index << ", want " << want[p].index;
    }
    EXPECT_NEAR(got[p].score, score_of[got[p].index], tolerance);
    if (p > 0) {
      const bool ordered = got[p - 1].score > got[p].score ||
                           (got[p - 1].score == got[p].score && got[p - 1].index < got[p].index);
      EXPECT_TRUE(ordered) << "ranks " << p - 1 << " and " << p << " out of order";
    }
  }
}

}  // namespace fuserank::engine::cuda::gpu_test
