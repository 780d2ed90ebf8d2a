// A CudaWorker and the model's hot-row counters: with cache.placement: host its device
// hot-row cache (the descriptors of the generation it reads, the device counters and
// their read-back at most once per interval), else every lookup counted as a miss.
#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <utility>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/status_macros.h"
#include "kernels/hot_cache.h"

namespace fuserank::engine::cuda {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CudaWorker::~CudaWorker() { FlushHotCounts(); }

void CudaWorker::FlushHotCounts() {
  if (shared_->hot_cache == nullptr || shared_->hot_rows == nullptr || !d_hot_counts_.get() ||
      !h_hot_counts_.get()) {
    return;  // nothing counted on the device, or an allocation failed in Create
  }
  // The counts of the batches since the last read (a worker idle since then, at the end of
  // the warm-up, or shutting down), unless the device has failed; in the worker stream's
  // order, after anything a failed batch left queued there.
  cudaStream_t s = stream_.get();
  if (cudaMemcpyAsync(h_hot_counts_.get(), d_hot_counts_.get(), d_hot_counts_.bytes(),
                      cudaMemcpyDeviceToHost, s) != cudaSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess) {
    return;
  }
  read_hot_counts_ = true;
  RecordLookups();
  read_hot_counts_ = false;
  hot_counts_read_ns_ = NowNs();
}

absl::Status CudaWorker::AllocateHotCache() {
  if (shared_->hot_cache == nullptr) return absl::OkStatus();
  const size_t tables = shared_->layout.lookup.size();
  ASSIGN_OR_RETURN(d_hot_, DeviceBuffer::Allocate(tables * sizeof(kernels::HotCacheTable),
                                                  "hot-row cache descriptors"));
  ASSIGN_OR_RETURN(d_hot_counts_,
                   DeviceBuffer::Allocate(2 * tables * sizeof(uint64_t), "hot-row cache counters"));
  ASSIGN_OR_RETURN(h_hot_counts_,
                   PinnedBuffer::Allocate(2 * tables * sizeof(uint64_t), "hot-row cache counters"));
  hot_counts_seen_.assign(2 * tables, 0);
  hot_counts_read_ns_ = NowNs();
  return absl::OkStatus();
}

absl::Status CudaWorker::RefreshHotCache() {
  read_hot_counts_ = false;
  DeviceHotCache* cache = shared_->hot_cache;
  if (cache == nullptr) return absl::OkStatus();
  cache->Notice();
  if (hot_gen_ == nullptr || hot_gen_->version != cache->version()) {
    std::shared_ptr<const HotCacheGeneration> gen = cache->current();
    if (gen != hot_gen_) {
      // In stream order: this worker's earlier batches are done (Run waits for each), the
      // batch at hand reads the new descriptors.
      RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(d_hot_.get(), gen->d_tables.get(), d_hot_.bytes(),
                                           cudaMemcpyDeviceToDevice, stream_.get()),
                           "copy hot-row cache descriptors");
      hot_gen_ = std::move(gen);
    }
  }
  const int64_t now = NowNs();
  if (now - hot_counts_read_ns_ >= shared_->hot_count_interval_ns) {
    read_hot_counts_ = true;
    hot_counts_read_ns_ = now;
  }
  return absl::OkStatus();
}

void CudaWorker::RecordLookups() {
  if (shared_->hot_rows == nullptr) return;
  if (shared_->hot_cache != nullptr) {
    if (!read_hot_counts_) return;
    // The device counters are cumulative: add what they gained since the last read.
    const auto* counts = h_hot_counts_.get<unsigned long long>();
    for (size_t k = 0; k < shared_->layout.lookup_spec_index.size(); ++k) {
      const uint64_t hits = counts[2 * k] - hot_counts_seen_[2 * k];
      const uint64_t misses = counts[2 * k + 1] - hot_counts_seen_[2 * k + 1];
      hot_counts_seen_[2 * k] = counts[2 * k];
      hot_counts_seen_[2 * k + 1] = counts[2 * k + 1];
      shared_->hot_rows->RecordLookups(shared_->layout.lookup_spec_index[k], hits, misses);
    }
    return;
  }
  const std::vector<uint64_t>& ids = packer_.ids_per_table();
  for (size_t k = 0; k < ids.size(); ++k) {
    shared_->hot_rows->RecordLookups(shared_->layout.lookup_spec_index[k], /*hits=*/0, ids[k]);
  }
}

}  // namespace fuserank::engine::cuda
