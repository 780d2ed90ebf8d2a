// Move-only owners of a CUDA stream, event, instantiated graph and cuBLASLt handle.
// Not thread-safe: each belongs to one worker.
#ifndef FUSERANK_ENGINE_CUDA_CUDA_HANDLES_H_
#define FUSERANK_ENGINE_CUDA_CUDA_HANDLES_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <utility>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_status.h"

namespace fuserank::engine::cuda {

// Owns a handle `H`; `Destroy` releases it.
template <typename H, auto Destroy>
class Owned {
 public:
  Owned() = default;
  explicit Owned(H h) : h_(h) {}
  Owned(Owned&& other) noexcept : h_(std::exchange(other.h_, H{})) {}
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      Reset();
      h_ = std::exchange(other.h_, H{});
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { Reset(); }

  void Reset() {
    if (h_ != H{}) Destroy(h_);
    h_ = H{};
  }
  H get() const { return h_; }
  explicit operator bool() const { return h_ != H{}; }

 private:
  H h_{};
};

using Stream = Owned<cudaStream_t, cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, cudaEventDestroy>;
using GraphExec = Owned<cudaGraphExec_t, cudaGraphExecDestroy>;
using Graph = Owned<cudaGraph_t, cudaGraphDestroy>;
using LtHandle = Owned<cublasLtHandle_t, cublasLtDestroy>;
using LtMatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using LtLayout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using LtPreference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

inline absl::StatusOr<Stream> CreateStream() {
  cudaStream_t s = nullptr;
  RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                       "cudaStreamCreateWithFlags");
  return Stream(s);
}

// A timing event (for device-time stage figures); `flags` adds cudaEventBlockingSync for
// one a thread waits on asleep.
inline absl::StatusOr<Event> CreateEvent(unsigned flags = cudaEventDefault) {
  cudaEvent_t e = nullptr;
  RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&e, flags), "cudaEventCreateWithFlags");
  return Event(e);
}

inline absl::StatusOr<LtHandle> CreateLtHandle() {
  cublasLtHandle_t h = nullptr;
  RETURN_IF_CUBLAS_ERROR(cublasLtCreate(&h), "cublasLtCreate");
  return LtHandle(h);
}

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_CUDA_HANDLES_H_
