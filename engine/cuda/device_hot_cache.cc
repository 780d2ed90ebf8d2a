#include "engine/cuda/device_hot_cache.h"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/hot_cache_image.h"
#include "engine/device_fault.h"
#include "engine/status_macros.h"
#include "kernels/hot_cache.h"
#include "spdlog/spdlog.h"

namespace fuserank::engine::cuda {
namespace {

// Copies `bytes` host bytes into new stream-ordered device memory (the caller waits).
absl::StatusOr<StreamBuffer> Copy(const void* src, size_t bytes, cudaStream_t stream,
                                  const std::string& what) {
  ASSIGN_OR_RETURN(StreamBuffer buffer, StreamBuffer::Allocate(bytes, stream, what));
  if (bytes > 0) {
    RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(buffer.get(), src, bytes, cudaMemcpyHostToDevice, stream),
                         absl::StrCat("copy ", what));
  }
  return buffer;
}

}  // namespace

DeviceHotCache::DeviceHotCache(const Model& model, const GpuLayout& layout, HotRowManager* manager,
                               int gpu, absl::Duration poll)
    : model_(model), layout_(layout), manager_(manager), gpu_(gpu), poll_(poll) {}

absl::StatusOr<std::unique_ptr<DeviceHotCache>> DeviceHotCache::Create(const Model& model,
                                                                       const GpuLayout& layout,
                                                                       HotRowManager* manager,
                                                                       int gpu,
                                                                       absl::Duration poll) {
  std::unique_ptr<DeviceHotCache> cache(new DeviceHotCache(model, layout, manager, gpu, poll));
  ASSIGN_OR_RETURN(cache->stream_, CreateStream());
  const std::shared_ptr<const HotRowSnapshot> snapshot = manager->snapshot();
  ASSIGN_OR_RETURN(std::shared_ptr<const HotCacheGeneration> first,
                   cache->Build(*snapshot, /*previous=*/nullptr));
  cache->version_.store(first->version, std::memory_order_release);
  cache->tried_.store(first->version, std::memory_order_release);
  cache->current_.store(std::move(first), std::memory_order_release);
  cache->thread_ = std::thread([c = cache.get()] { c->Run(); });
  return cache;
}

DeviceHotCache::~DeviceHotCache() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  cudaSetDevice(gpu_);
  retired_.clear();
  current_.store(nullptr);
}

void DeviceHotCache::Notice() {
  if (manager_->version() == tried_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

absl::StatusOr<std::shared_ptr<const HotCacheGeneration>> DeviceHotCache::Build(
    const HotRowSnapshot& snapshot, const HotCacheGeneration* previous) {
  auto gen = std::make_shared<HotCacheGeneration>();
  gen->version = snapshot.version;
  std::vector<kernels::HotCacheTable> tables;
  // The pageable sources of the uploads below (with `tables`): a copy from pageable memory
  // may still read its source until the stream is synchronized, so the images outlive the
  // loop, and every return waits for the stream before they go (an error's too, below).
  std::vector<HotCacheImage> images;
  images.reserve(layout_.lookup_spec_index.size());
  struct WaitOnReturn {
    cudaStream_t stream;
    ~WaitOnReturn() { static_cast<void>(cudaStreamSynchronize(stream)); }
  } wait_on_return{stream_.get()};
  for (size_t k = 0; k < layout_.lookup_spec_index.size(); ++k) {
    const int spec = layout_.lookup_spec_index[k];
    const std::shared_ptr<const HotSet>& set = snapshot.tables[spec];
    if (previous != nullptr && previous->tables[k]->set == set) {  // unchanged by the swap
      gen->tables.push_back(previous->tables[k]);
      tables.push_back(previous->tables[k]->table);
      continue;
    }
    const EmbeddingTable& table = model_.tables()[spec];
    const HotCacheImage& image = images.emplace_back(MakeHotCacheImage(table, *set));
    auto buffers = std::make_shared<HotCacheTableBuffers>();
    buffers->set = set;
    if (image.count > 0) {
      ASSIGN_OR_RETURN(
          buffers->index,
          Copy(image.index.data(), image.index.size() * sizeof(image.index[0]), stream_.get(),
               absl::StrCat("hot-row index of table '", table.name, "'")));
      ASSIGN_OR_RETURN(buffers->rows, Copy(image.rows.data(), image.rows.size(), stream_.get(),
                                           absl::StrCat("hot rows of table '", table.name, "'")));
    }
    buffers->table = image.Table(buffers->index.get<kernels::HotCacheEntry>(),
                                 buffers->rows.get<unsigned char>());
    tables.push_back(buffers->table);
    gen->tables.push_back(std::move(buffers));
  }
  ASSIGN_OR_RETURN(gen->d_tables, Copy(tables.data(), tables.size() * sizeof(tables[0]),
                                       stream_.get(), "hot-row cache descriptors"));
  // `images` and `tables` are still alive here: the copies land before they go (this wait
  // reports an error; wait_on_return covers the early returns above).
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_.get()), "hot-row cache upload");
  return std::shared_ptr<const HotCacheGeneration>(std::move(gen));
}

void DeviceHotCache::Run() {
  if (cudaSetDevice(gpu_) != cudaSuccess) {
    spdlog::error(
        "cuda:{}: the hot-row cache updater cannot select its device; hot-row swaps "
        "are not uploaded",
        gpu_);
    return;
  }
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(this, &DeviceHotCache::Woken), poll_);
      if (stop_) return;
      wake_ = false;
    }
    FreeRetired();
    const std::shared_ptr<const HotRowSnapshot> snapshot = manager_->snapshot();
    if (snapshot->version == tried_.load(std::memory_order_relaxed)) continue;
    absl::StatusOr<std::shared_ptr<const HotCacheGeneration>> built =
        Build(*snapshot, current().get());
    // Tried, built or not: a failed version is not retried until the manager moves on.
    tried_.store(snapshot->version, std::memory_order_release);
    if (IsDeviceFault(built.status())) {
      // The context is lost: every later upload would fail the same way, so stop here
      // (the backend reports the fault on its next batch).
      spdlog::error(
          "cuda:{}: the device failed while uploading hot-row set version {}; the hot-row "
          "cache updater stops: {}",
          gpu_, snapshot->version, std::string(built.status().message()));
      return;
    }
    if (!built.ok()) {
      static_cast<void>(cudaGetLastError());
      spdlog::warn(
          "cuda:{}: uploading hot-row set version {} to the device cache failed; batches go "
          "on reading version {} (the same scores, other hit rates): {}",
          gpu_, snapshot->version, version(), std::string(built.status().message()));
      continue;
    }
    std::shared_ptr<const HotCacheGeneration> old =
        current_.exchange(*std::move(built), std::memory_order_acq_rel);
    version_.store(snapshot->version, std::memory_order_release);
    spdlog::debug("cuda:{}: hot-row cache version {} published", gpu_, snapshot->version);
    retired_.push_back(std::move(old));
  }
}

void DeviceHotCache::FreeRetired() {
  // A retired generation is no longer published, so no new holder can appear: use_count()
  // == 1 means only this list holds it, and a worker lets go of a generation only between
  // its batches (after waiting for the last), so no stream reads it any more. Its memory
  // goes back in this stream's order.
  std::erase_if(retired_, [](const std::shared_ptr<const HotCacheGeneration>& g) {
    return g.use_count() == 1;
  });
}

}  // namespace fuserank::engine::cuda
