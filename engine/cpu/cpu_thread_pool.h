// A fixed set of helper threads that split one loop with the calling thread, for the CPU
// engine's large batches (engine.cpu_threads). One caller at a time: each backend worker
// owns its own pool. ParallelFor allocates nothing.
#ifndef FUSERANK_ENGINE_CPU_CPU_THREAD_POOL_H_
#define FUSERANK_ENGINE_CPU_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace fuserank::engine {

class CpuThreadPool {
 public:
  // `threads` >= 1 counts the caller: threads - 1 helpers are started, each `nice` steps
  // below the constructing thread's priority (engine.worker_nice, engine/thread_priority.h).
  explicit CpuThreadPool(int threads, int nice = 0);
  ~CpuThreadPool();
  CpuThreadPool(const CpuThreadPool&) = delete;
  CpuThreadPool& operator=(const CpuThreadPool&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

  // Calls fn(thread, i) once for every i in [0, n), spread over the caller (thread 0)
  // and the helpers (1 .. threads() - 1), and returns when all calls are done.
  // REQUIRES: one ParallelFor at a time; fn does not call ParallelFor.
  void ParallelFor(int n, absl::FunctionRef<void(int thread, int i)> fn);

 private:
  void HelperLoop(int thread);
  void Drain(int thread);

  std::mutex mu_;
  std::condition_variable wake_;  // helpers wait for a new generation or stop
  std::condition_variable done_;  // the caller waits for busy_ == 0
  uint64_t generation_ = 0;       // guarded by mu_
  int busy_ = 0;                  // guarded by mu_: helpers still on this generation
  bool stop_ = false;             // guarded by mu_
  // The current loop; written under mu_ before generation_ advances.
  const absl::FunctionRef<void(int, int)>* fn_ = nullptr;
  int n_ = 0;
  std::atomic<int> next_{0};
  std::vector<std::thread> helpers_;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_THREAD_POOL_H_
