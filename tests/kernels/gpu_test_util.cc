#include "tests/kernels/gpu_test_util.h"

#include <cmath>
#include <cstdio>
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

namespace {

// True when `nvidia-smi -L` exits 0 listing a GPU ("GPU 0: ..."); false without the tool.
bool NvidiaSmiListsAGpu() {
  FILE* pipe = popen("nvidia-smi -L 2>/dev/null", "r");
  if (pipe == nullptr) return false;
  std::string out;
  char buffer[512];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  return status == 0 && (out.rfind("GPU ", 0) == 0 || out.find("\nGPU ") != std::string::npos);
}

std::string FindGpuRequiredReason() {
  const char* required = std::getenv("FUSERANK_REQUIRE_GPU");
  if (required != nullptr && std::string(required) == "1") return "FUSERANK_REQUIRE_GPU=1";
  if (required != nullptr && std::string(required) == "0") return "";
  if (std::filesystem::exists("/dev/nvidiactl")) {
    return "/dev/nvidiactl exists (a GPU is here; FUSERANK_REQUIRE_GPU=0 lets the tests skip)";
  }
  if (NvidiaSmiListsAGpu()) {
    return "`nvidia-smi -L` lists a GPU (FUSERANK_REQUIRE_GPU=0 lets the tests skip)";
  }
  return "";
}

}  // namespace

std::string GpuRequiredReason() {
  static const std::string* const reason = new std::string(FindGpuRequiredReason());
  return *reason;
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
