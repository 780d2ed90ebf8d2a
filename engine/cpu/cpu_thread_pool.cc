#include "engine/cpu/cpu_thread_pool.h"

#include "engine/thread_priority.h"
#include "spdlog/spdlog.h"

namespace fuserank::engine {

CpuThreadPool::CpuThreadPool(int threads, int nice) {
  for (int t = 1; t < threads; ++t) {
    helpers_.emplace_back([this, t, nice] {
      if (absl::Status s = LowerCurrentThreadPriority(nice); !s.ok()) {
        spdlog::warn("cpu engine helper thread {}: engine.worker_nice not applied: {}", t,
                     s.ToString());
      }
      HelperLoop(t);
    });
  }
}

CpuThreadPool::~CpuThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& helper : helpers_) helper.join();
}

void CpuThreadPool::Drain(int thread) {
  for (int i = next_.fetch_add(1, std::memory_order_relaxed); i < n_;
       i = next_.fetch_add(1, std::memory_order_relaxed)) {
    (*fn_)(thread, i);
  }
}

void CpuThreadPool::HelperLoop(int thread) {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    Drain(thread);
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last = --busy_ == 0;
    }
    if (last) done_.notify_one();
  }
}

void CpuThreadPool::ParallelFor(int n, absl::FunctionRef<void(int thread, int i)> fn) {
  if (n <= 0) return;
  if (helpers_.empty() || n == 1) {
    for (int i = 0; i < n; ++i) fn(0, i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    next_.store(0, std::memory_order_relaxed);
    busy_ = static_cast<int>(helpers_.size());
    ++generation_;
  }
  wake_.notify_all();
  Drain(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return busy_ == 0; });
  fn_ = nullptr;
}

}  // namespace fuserank::engine
