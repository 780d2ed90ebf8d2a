// Closed-loop gRPC load for the load-and-fault tests: `clients` callers on the callback
// API, each with one Rank call in flight, issuing the next as soon as the last returns --
// after a short backoff when it was refused with RESOURCE_EXHAUSTED, as a well-behaved
// client does -- and stopping on any other error. Every call's outcome and latency is kept,
// and OK responses are compared with the expected bytes. Plus small helpers: percentiles
// and Prometheus text lookups. Thread-safe.
#ifndef FUSERANK_TESTS_LOAD_CLOSED_LOOP_UTIL_H_
#define FUSERANK_TESTS_LOAD_CLOSED_LOOP_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fuserank/v1/ranker.grpc.pb.h"

namespace fuserank::testing {

struct CallSample {
  grpc::StatusCode code = grpc::StatusCode::OK;
  double start_s = 0;   // when it was issued, seconds since Start()
  double seconds = 0;   // its latency
  bool matched = true;  // OK calls: the response was the expected one
};

struct LoadOptions {
  int clients = 64;
  int channels = 4;  // separate connections the clients are spread over
  absl::Duration deadline = absl::Seconds(30);
  absl::Duration backoff = absl::Milliseconds(1);  // after RESOURCE_EXHAUSTED
};

class ClosedLoopLoad {
 public:
  // Client c sends requests[(c + k * clients) % size] on its k-th call. `expected` (empty:
  // no check) holds the serialized RankResponse each request must get. Both must outlive
  // the load.
  ClosedLoopLoad(const std::string& target, const std::vector<v1::RankRequest>* requests,
                 const std::vector<std::string>* expected, LoadOptions options);
  ~ClosedLoopLoad();  // Stop(), then waits for the calls in flight
  ClosedLoopLoad(const ClosedLoopLoad&) = delete;
  ClosedLoopLoad& operator=(const ClosedLoopLoad&) = delete;

  void Start();
  // No call is issued from now on.
  void Stop();
  // Waits until no call is in flight; false on timeout.
  bool WaitIdle(absl::Duration timeout);
  std::vector<CallSample> Samples() const;
  // Seconds since Start().
  double Elapsed() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Client;

  // Issues `client`'s next call. The caller has counted it in outstanding_.
  void Issue(Client* client);
  void OnDone(Client* client, const grpc::Status& status);
  void RetryLoop();

  const std::vector<v1::RankRequest>* const requests_;
  const std::vector<std::string>* const expected_;
  const LoadOptions options_;
  std::vector<std::unique_ptr<v1::Ranker::Stub>> stubs_;
  std::vector<std::unique_ptr<Client>> clients_;
  Clock::time_point start_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<CallSample> samples_ ABSL_GUARDED_BY(mu_);
  struct Retry {
    Clock::time_point at;
    Client* client;
  };
  std::deque<Retry> retries_ ABSL_GUARDED_BY(mu_);  // in `at` order: one fixed backoff
  std::thread retry_thread_;
};

// The q-quantile (0..1, nearest rank) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double q);

// Sum of the Prometheus text samples named `name` that carry every `labels` pair (each
// written as in the text format: code="OK").
double MetricValue(const std::string& scrape, const std::string& name,
                   const std::vector<std::string>& labels = {});

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_LOAD_CLOSED_LOOP_UTIL_H_
