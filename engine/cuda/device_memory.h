// Owners of device memory (cudaMalloc) and pinned host memory (cudaHostAlloc; mapped into
// the device's address space for tables kept in host memory): move-only, freed on
// destruction. The only place in the engine that allocates either.
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

struct DeviceFree {
  static void Free(void* p) { cudaFree(p); }
};
struct HostFree {
  static void Free(void* p) { cudaFreeHost(p); }
};

template <typename Free>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  void Reset() {
    if (ptr_ != nullptr) Free::Free(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 protected:
  Buffer(void* ptr, size_t bytes) : ptr_(ptr), bytes_(bytes) {}

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
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
class StreamBuffer {
 public:
  StreamBuffer() = default;
  static absl::StatusOr<StreamBuffer> Allocate(size_t bytes, cudaStream_t stream,
                                               absl::string_view what) {
    StreamBuffer buffer;
    if (bytes == 0) return buffer;
    const cudaError_t err = cudaMallocAsync(&buffer.ptr_, bytes, stream);
    if (err != cudaSuccess) {
      return CudaStatus(err, absl::StrCat("cudaMallocAsync ", bytes, " bytes for ", what));
    }
    buffer.bytes_ = bytes;
    buffer.stream_ = stream;
    return buffer;
  }
  StreamBuffer(StreamBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)),
        stream_(other.stream_) {}
  StreamBuffer& operator=(StreamBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      stream_ = other.stream_;
    }
    return *this;
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  ~StreamBuffer() { Reset(); }

  void Reset() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

// Page-locked host memory mapped into the device's address space: kernels read it over
// the bus through device_ptr() (cache.placement: host keeps the embedding tables here).
class MappedHostBuffer : public internal::Buffer<internal::HostFree> {
 public:
  MappedHostBuffer() = default;
  static absl::StatusOr<MappedHostBuffer> Allocate(size_t bytes, absl::string_view what) {
    if (bytes == 0) return MappedHostBuffer();
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
    if (err != cudaSuccess) {
      return CudaStatus(err, absl::StrCat("cudaHostAlloc (mapped) ", bytes, " bytes for ", what));
    }
    MappedHostBuffer buffer(p, bytes);
    RETURN_IF_CUDA_ERROR(cudaHostGetDevicePointer(&buffer.device_, p, 0),
                         absl::StrCat("cudaHostGetDevicePointer ", what));
    return buffer;
  }
  MappedHostBuffer(MappedHostBuffer&& other) noexcept
      : Buffer(std::move(other)), device_(std::exchange(other.device_, nullptr)) {}
  MappedHostBuffer& operator=(MappedHostBuffer&& other) noexcept {
    Buffer::operator=(std::move(other));
    device_ = std::exchange(other.device_, nullptr);
    return *this;
  }
  // The device's address of the first byte (what a kernel reads).
  template <typename T = void>
  T* device_ptr() const {
    return static_cast<T*>(device_);
  }

 private:
  MappedHostBuffer(void* p, size_t bytes) : Buffer(p, bytes) {}
  void* device_ = nullptr;
};

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_DEVICE_MEMORY_H_
