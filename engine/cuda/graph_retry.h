// When a CUDA worker tries to capture the graph of a (size bucket, top-K shape) again
// after a capture failed: after 1, 2, 4, ... eager batches of that key, at most every
// kMaxGraphRetryGap batches, so a transient failure costs a few eager batches and a
// permanent one costs one failed capture per kMaxGraphRetryGap batches, never one per
// batch. Plain C++ (no CUDA), unit-tested on the CPU. Not thread-safe: one per worker key.
#ifndef FUSERANK_ENGINE_CUDA_GRAPH_RETRY_H_
#define FUSERANK_ENGINE_CUDA_GRAPH_RETRY_H_

#include <algorithm>
#include <cstdint>

namespace fuserank::engine::cuda {

inline constexpr uint64_t kMaxGraphRetryGap = 1024;

class GraphRetry {
 public:
  // True when the batch about to run eagerly should be captured after it runs.
  bool ShouldCapture() const { return eager_since_failure_ >= Gap(); }
  // One batch of this key ran eagerly (call before ShouldCapture for the next one).
  void RanEagerly() { ++eager_since_failure_; }
  void CaptureFailed() {
    ++failures_;
    eager_since_failure_ = 0;
  }
  void CaptureSucceeded() {
    failures_ = 0;
    eager_since_failure_ = 0;
  }
  uint32_t failures() const { return failures_; }  // consecutive failed captures

 private:
  // Eager batches to wait for after `failures_` consecutive failures (0 before any).
  uint64_t Gap() const {
    if (failures_ == 0) return 0;
    const uint32_t shift = std::min<uint32_t>(failures_ - 1, 10);
    return std::min<uint64_t>(uint64_t{1} << shift, kMaxGraphRetryGap);
  }

  uint32_t failures_ = 0;
  uint64_t eager_since_failure_ = 0;
};

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_GRAPH_RETRY_H_
