// Device timing for the GPU benchmarks: CUDA events around enqueued work, an L2 flush
// between repetitions, medians, and one JSON line per result (read by summarize.py).
// Not thread-safe; one per benchmark thread.
#ifndef FUSERANK_BENCH_GPU_BENCH_TIMER_H_
#define FUSERANK_BENCH_GPU_BENCH_TIMER_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace fuserank::bench {

inline void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

class DeviceTimer {
 public:
  explicit DeviceTimer(size_t l2_bytes) {
    Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    Check(cudaEventCreate(&start_), "event");
    Check(cudaEventCreate(&stop_), "event");
    flush_bytes_ = 4 * l2_bytes;  // several times the L2: nothing of the last run stays
    Check(cudaMalloc(&flush_, flush_bytes_), "flush buffer");
  }
  ~DeviceTimer() {
    cudaFree(flush_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t stream() const { return stream_; }

  // Evicts the L2: writes the flush buffer (several times the L2) and waits for it, so the
  // next work on any stream finds none of the data the last run left in L2.
  void FlushL2() {
    Check(cudaMemsetAsync(flush_, ++flushes_ & 0xFF, flush_bytes_, stream_), "flush");
    Check(cudaStreamSynchronize(stream_), "flush sync");
  }

  // Median seconds of `reps` runs of `enqueue` (after `warmup`), L2 flushed before each.
  double Time(const std::function<void(cudaStream_t)>& enqueue, int reps, int warmup = 3,
              bool flush = true) {
    std::vector<double> s;
    for (int i = 0; i < warmup + reps; ++i) {
      if (flush) Check(cudaMemsetAsync(flush_, i & 0xFF, flush_bytes_, stream_), "flush");
      Check(cudaEventRecord(start_, stream_), "record");
      enqueue(stream_);
      Check(cudaEventRecord(stop_, stream_), "record");
      Check(cudaEventSynchronize(stop_), "sync");
      float ms = 0;
      Check(cudaEventElapsedTime(&ms, start_, stop_), "elapsed");
      if (i >= warmup) s.push_back(ms * 1e-3);
    }
    return Median(s);
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  void* flush_ = nullptr;
  size_t flush_bytes_ = 0;
  int flushes_ = 0;  // FlushL2's count: each writes another byte than the last
};

// {"bench": name, k: v, ...} on one line of stdout.
class JsonLine {
 public:
  explicit JsonLine(const std::string& bench) { text_ = "{\"bench\": \"" + bench + "\""; }
  JsonLine& Add(const std::string& key, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", v);
    text_ += ", \"" + key + "\": " + buf;
    return *this;
  }
  JsonLine& Add(const std::string& key, const std::string& v) {
    text_ += ", \"" + key + "\": \"" + v + "\"";
    return *this;
  }
  void Print() const {
    std::printf("%s}\n", text_.c_str());
    std::fflush(stdout);
  }

 private:
  std::string text_;
};

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_GPU_BENCH_TIMER_H_
