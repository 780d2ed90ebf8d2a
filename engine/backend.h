// The seam between the request path and the compute: a Backend scores whole Batches.
// The CPU engine implements it here; the CUDA backend implements it in a module that
// the server loads at run time. One Backend serves one loaded model.
#ifndef FUSERANK_ENGINE_BACKEND_H_
#define FUSERANK_ENGINE_BACKEND_H_

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/batch.h"
#include "engine/config_defaults.h"

namespace fuserank::engine {

class HotRowManager;
class RemoteTier;

// engine.cpu_precision: the CPU engine's MLP arithmetic. kFp32 is the reference; kBf16
// rounds the per-candidate layers' inputs and weights to bf16 and sums in fp32
// (engine/cpu/sgemm_bf16.h).
enum class CpuPrecision { kFp32, kBf16 };

struct BackendOptions {
  int workers = defaults::kStreams;  // engine.streams: concurrent Run() calls (one per worker)
  int cpu_threads = defaults::kCpuThreads;  // CPU backend: threads that split one large batch
  int worker_nice = 0;       // CPU backend: its helper threads' nice steps (as BatcherOptions')
  int gpu = defaults::kGpu;  // CUDA: device ordinal
  bool cuda_graphs = defaults::kCudaGraphs;          // CUDA: replay a graph per batch-size bucket
  bool allow_tf32 = defaults::kAllowTf32;            // CUDA: TF32 tensor-core math in the MLP
  CpuPrecision cpu_precision = CpuPrecision::kFp32;  // CPU backend: MLP arithmetic
  // CUDA: a worker waits for its batch asleep (true: cudaEventBlockingSync) or spinning
  // on a core (false: a few microseconds sooner, a core per busy worker).
  bool cuda_blocking_wait = defaults::kCudaBlockingWait;
  int max_batch_candidates = defaults::kMaxBatchCandidates;
  // The model's hot-row sets (cache.*), or null for none. The CPU backend reads hot rows
  // from the current snapshot's compact copies and adds each batch's hits and misses to
  // the manager's counters. The CUDA backend with host_tables uploads each snapshot as its
  // HBM hot-row cache and adds the device's counts; with its tables in device memory it
  // has no hot tier and records every lookup as a miss. Must outlive the backend.
  HotRowManager* hot_rows = nullptr;
  // cache.placement: host: the CUDA backend keeps the tables in page-locked host memory
  // mapped into the device (a table may be larger than the device's memory) and the hot
  // rows in device memory. The CPU engine's tables are in host memory either way.
  bool host_tables = false;
  // cache.policy: frequency: sample row accesses into hot_rows' frequency sketches (the
  // CPU engine while it pools; for the CUDA backend, CreateBackend wraps it in a
  // SamplingBackend that samples each scored batch's rows on the host).
  bool sample_accesses = false;
  // The model's storage: redis tier (remote.*), or null when it has no remote table. The
  // CPU backend stages each batch's remote rows through it; the CUDA backend refuses a
  // model with remote tables. Must outlive the backend.
  RemoteTier* remote = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu" or "cuda:<ordinal>", as exported in fuserank_model_info{device}.
  virtual std::string device() const = 0;
  virtual int num_workers() const = 0;
  // Scores every candidate of `batch` and writes each request's top-K into `result`.
  // REQUIRES: 0 <= worker < num_workers(); at most one call per worker at a time;
  // batch.model is the model this backend was created for; the batch passed
  // ValidateBatch() (engine/batch_validation.h), or is an Append() of batches that did.
  // A backend walks no id to check it again: a batch that skipped validation may abort.
  virtual absl::Status Run(int worker, const Batch& batch, BatchResult* result) = 0;
  // OK while the backend can score batches. After a device fault (engine/device_fault.h:
  // an error that leaves the device unusable in this process) UNAVAILABLE naming the
  // device and the first error, for good: every later Run() returns it at once.
  // Thread-safe. The CPU engine is never failed.
  virtual absl::Status health() const { return absl::OkStatus(); }
  // Hands every lookup count the backend still holds to its hot-row manager (the CUDA
  // backend reads its device counters back at most once per interval), so that the warm-up's
  // lookups are counted before the serving counts start. REQUIRES: no Run() in flight.
  virtual void FlushLookupCounts() {}
  // The batches a warm-up runs on every worker before the backend serves, in order, each
  // given as its requests' candidate counts: enough that every buffer has grown and every
  // per-shape resource (the CUDA backend's graphs) exists before the first real batch.
  // `max_batch_candidates` bounds a batch, `max_request_candidates` a request. The CPU
  // engine's default: one request of 1 candidate and one of up to 256 (every code path;
  // its buffers grow on demand).
  virtual std::vector<std::vector<int>> WarmupBatches(int max_batch_candidates,
                                                      int max_request_candidates) const {
    const int large = std::max(1, std::min({256, max_batch_candidates, max_request_candidates}));
    return {{1}, {large}};
  }
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_BACKEND_H_
