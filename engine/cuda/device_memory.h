// Owners of device memory (cudaMalloc, or cudaMallocAsync in one stream's order) and
// pinned host memory (cudaHostAlloc; mapped into the device's address space for tables
// kept in host memory): move-only, freed on destruction. The only place in the engine
// that allocates either.
// Not thread-safe: one owner at a time.
#ifndef FUSERANK_ENGINE_CUDA_DEVICE_MEMORY_H_
#define FUSERANK_ENGINE_CUDA_DEVICE_MEMORY_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/cuda/cuda_status.h"

namespace fuserank::engine::cuda {

namespace internal {

// How a Buffer gives its memory back; stateful where the release needs more than the
// pointer (the stream of a stream-ordered allocation).
struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct HostFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
struct StreamFree {
  cudaStream_t stream = nullptr;
  void operator()(void* p) const { cudaFreeAsync(p, stream); }
};
// Mapped host memory: freed as page-locked memory; also holds the device's address of it.
struct MappedHostFree {
  void* device = nullptr;
  void operator()(void* p) const { cudaFreeHost(p); }
};

template <typename Free>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)),
        free_(std::exchange(other.free_, Free{})) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      free_ = std::exchange(other.free_, Free{});
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  void Reset() {
    if (ptr_ != nullptr) free_(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 protected:
  Buffer(void* ptr, size_t bytes, Free free = {}) : ptr_(ptr), bytes_(bytes), free_(free) {}
  const Free& free() const { return free_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Free free_{};
};

}  // namespace internal

// Device memory, zero-filled at allocation (so padded rows never hold garbage).
class DeviceBuffer : public internal::Buffer<internal::DeviceFree> {
 public:
  DeviceBuffer() = default;
  // `what` names the buffer in the error (e.g. "table 'user_id'").
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes, absl::string_view what) {
    if (bytes == 0) return DeviceBuffer();
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      return CudaStatus(err, absl::StrCat("cudaMalloc ", bytes, " bytes for ", what));
    }
    DeviceBuffer buffer(p, bytes);
    // The legacy stream does not order against the workers' non-blocking streams: wait
    // for the fill here (allocation happens at start and on rare growth only).
    RETURN_IF_CUDA_ERROR(cudaMemsetAsync(p, 0, bytes, nullptr), absl::StrCat("cudaMemset ", what));
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(nullptr), absl::StrCat("cudaMemset ", what));
    return buffer;
  }

 private:
  DeviceBuffer(void* p, size_t bytes) : Buffer(p, bytes) {}
};

// Page-locked host memory: the staging of the one copy in and the one copy out per batch.
class PinnedBuffer : public internal::Buffer<internal::HostFree> {
 public:
  PinnedBuffer() = default;
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes, absl::string_view what) {
    if (bytes == 0) return PinnedBuffer();
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (err != cudaSuccess) {
      return CudaStatus(err, absl::StrCat("cudaHostAlloc ", bytes, " bytes for ", what));
    }
    return PinnedBuffer(p, bytes);
  }

 private:
  PinnedBuffer(void* p, size_t bytes) : Buffer(p, bytes) {}
};

// Device memory allocated and freed in the order of one stream (cudaMallocAsync /
// cudaFreeAsync, the device's default memory pool): neither waits for the rest of the
// device, as cudaMalloc's zero fill and cudaFree do. Not zero-filled. The owner frees it
// only once no other stream's work reads it any more, and the stream outlives it.
class StreamBuffer : public internal::Buffer<internal::StreamFree> {
 public:
  StreamBuffer() = default;
  static absl::StatusOr<StreamBuffer> Allocate(size_t bytes, cudaStream_t stream,
                                               absl::string_view what) {
    if (bytes == 0) return StreamBuffer();
    void* p = nullptr;
    const cudaError_t err = cudaMallocAsync(&p, bytes, stream);
    if (err != cudaSuccess) {
      return CudaStatus(err, absl::StrCat("cudaMallocAsync ", bytes, " bytes for ", what));
    }
    return StreamBuffer(p, bytes, stream);
  }

 private:
  StreamBuffer(void* p, size_t bytes, cudaStream_t stream)
      : Buffer(p, bytes, internal::StreamFree{stream}) {}
};

// Page-locked host memory mapped into the device's address space: kernels read it over
// the bus through device_ptr() (cache.placement: host keeps the embedding tables here).
class MappedHostBuffer : public internal::Buffer<internal::MappedHostFree> {
 public:
  MappedHostBuffer() = default;
  static absl::StatusOr<MappedHostBuffer> Allocate(size_t bytes, absl::string_view what) {
    if (bytes == 0) return MappedHostBuffer();
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
    if (err != cudaSuccess) {
      return CudaStatus(err, absl::StrCat("cudaHostAlloc (mapped) ", bytes, " bytes for ", what));
    }
    void* device = nullptr;
    const cudaError_t mapped = cudaHostGetDevicePointer(&device, p, 0);
    if (mapped != cudaSuccess) {
      cudaFreeHost(p);
      return CudaStatus(mapped, absl::StrCat("cudaHostGetDevicePointer ", what));
    }
    return MappedHostBuffer(p, bytes, device);
  }
  // The device's address of the first byte (what a kernel reads).
  template <typename T = void>
  T* device_ptr() const {
    return static_cast<T*>(free().device);
  }

 private:
  MappedHostBuffer(void* p, size_t bytes, void* device)
      : Buffer(p, bytes, internal::MappedHostFree{device}) {}
};

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_DEVICE_MEMORY_H_
