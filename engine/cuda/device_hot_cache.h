// The HBM hot-row cache of a model served with cache.placement: host (tables in mapped host
// memory): every hot-row snapshot the model's HotRowManager publishes becomes one
// generation in device memory, each table's index and hot rows (engine/cuda/
// hot_cache_image.h) and the array of kernels::HotCacheTable descriptors that a worker
// copies into its own before a batch. An updater thread builds a generation when a worker
// notices (or its poll sees) a newer snapshot, off the request path, and publishes it;
// batches in flight keep the generation they started with (a shared_ptr), and the updater
// frees a replaced generation once no worker holds it. A swap never changes a score bit:
// a hot row is a bit-identical copy of the table's row.
// Thread-safe: current(), version() and Notice() from any thread.
#ifndef FUSERANK_ENGINE_CUDA_DEVICE_HOT_CACHE_H_
#define FUSERANK_ENGINE_CUDA_DEVICE_HOT_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/cuda/cuda_handles.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/gpu_layout.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "engine/hot_rows/hot_rows.h"
#include "engine/model.h"
#include "kernels/hot_cache.h"

namespace fuserank::engine::cuda {

// One table's cache in device memory, built from one hot set: generations whose snapshot
// holds the same set share it (a swap uploads only the tables it changed).
struct HotCacheTableBuffers {
  std::shared_ptr<const HotSet> set;  // what it was built from
  StreamBuffer index;                 // empty when the set has no rows
  StreamBuffer rows;
  kernels::HotCacheTable table;  // its descriptor
};

// One snapshot's caches in device memory, allocated and freed in the updater's stream
// order (no device-wide wait). Immutable once published.
struct HotCacheGeneration {
  uint64_t version = 0;                                             // the snapshot's
  std::vector<std::shared_ptr<const HotCacheTableBuffers>> tables;  // lookup order
  StreamBuffer d_tables;  // kernels::HotCacheTable per lookup table
};

class DeviceHotCache {
 public:
  // Builds the generation of the manager's current snapshot and starts the updater, which
  // also looks for a newer snapshot every `poll` (a swap with no traffic is uploaded
  // within it). REQUIRES: the current device is `gpu`; `manager` outlives the cache.
  static absl::StatusOr<std::unique_ptr<DeviceHotCache>> Create(const Model& model,
                                                                const GpuLayout& layout,
                                                                HotRowManager* manager, int gpu,
                                                                absl::Duration poll);
  // Stops the updater and frees every generation. REQUIRES: no worker holds one.
  ~DeviceHotCache();

  // The generation to read from (never null): hold it for the batch.
  std::shared_ptr<const HotCacheGeneration> current() const {
    return current_.load(std::memory_order_acquire);
  }
  // current()->version, one atomic load.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // Wakes the updater if the manager has published a snapshot the updater has not tried
  // yet. Cheap when it has not (two atomic loads): call it before every batch.
  void Notice();

  DeviceHotCache(const DeviceHotCache&) = delete;
  DeviceHotCache& operator=(const DeviceHotCache&) = delete;

 private:
  DeviceHotCache(const Model& model, const GpuLayout& layout, HotRowManager* manager, int gpu,
                 absl::Duration poll);
  // The generation of `snapshot` (allocations and copies on stream_, waited for); the
  // tables whose set is the one `previous` (may be null) was built from are shared.
  absl::StatusOr<std::shared_ptr<const HotCacheGeneration>> Build(
      const HotRowSnapshot& snapshot, const HotCacheGeneration* previous);
  void Run();
  bool Woken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_ || stop_; }
  // Frees the replaced generations that no worker holds any more.
  void FreeRetired();

  const Model& model_;
  const GpuLayout layout_;
  HotRowManager* const manager_;
  const int gpu_;
  const absl::Duration poll_;
  Stream stream_;
  std::atomic<std::shared_ptr<const HotCacheGeneration>> current_;
  std::atomic<uint64_t> version_{0};
  // The last snapshot version the updater built or failed to build (Notice compares).
  std::atomic<uint64_t> tried_{0};
  mutable absl::Mutex mu_;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Updater thread only: generations replaced and maybe still held.
  std::vector<std::shared_ptr<const HotCacheGeneration>> retired_;
  std::thread thread_;
};

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_DEVICE_HOT_CACHE_H_
