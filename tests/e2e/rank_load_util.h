// Background Rank traffic for the e2e tests of failures under load: threads that send
// random requests until stopped and count what came back. The counters are atomics, read
// from the test thread while the load runs; Stop() (and the destructor) joins the threads.
#ifndef FUSERANK_TESTS_E2E_RANK_LOAD_UTIL_H_
#define FUSERANK_TESTS_E2E_RANK_LOAD_UTIL_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "fuserank/v1/ranker.grpc.pb.h"

namespace fuserank::testing {

class RankLoad {
 public:
  // Starts `threads` threads sending requests for SmallSpec(1, 2, rows, ...) models
  // (RandomSmallSpecRequest, 24 candidates) to `stub`; an UNAVAILABLE reply whose message
  // lacks `named` counts in `unnamed` too.
  RankLoad(v1::Ranker::Stub* stub, int64_t rows, std::string named, int threads = 4);
  ~RankLoad() { Stop(); }
  RankLoad(const RankLoad&) = delete;
  RankLoad& operator=(const RankLoad&) = delete;

  void Stop();

  std::atomic<int> ok{0};
  std::atomic<int> unavailable{0};
  std::atomic<int> other{0};    // any other status
  std::atomic<int> unnamed{0};  // UNAVAILABLE without `named` in its message
  std::atomic<int> streak{0};   // OK replies since the last one that was not

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_RANK_LOAD_UTIL_H_
