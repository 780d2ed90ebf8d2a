// What the load tests on an in-process server share: the load model and its requests, a
// server started on 127.0.0.1:0 from a config string, the closed-loop workload checked
// against the reference, the slow requests that keep a one-worker server busy, and the
// status codes of a run counted and printed. Test helpers; not thread-safe.
#ifndef FUSERANK_TESTS_LOAD_LOAD_SERVER_UTIL_H_
#define FUSERANK_TESTS_LOAD_LOAD_SERVER_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "server/server.h"
#include "tests/load/closed_loop_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::testing {

inline constexpr int kQueueCapacity = 16;
inline constexpr int kStreams = 1;
inline constexpr int kCandidates = 32;           // per request
inline constexpr int kMaxBatchCandidates = 256;  // so a batch holds at most 8 requests
inline constexpr int kRequestsPerBatch = kMaxBatchCandidates / kCandidates;
// The most requests the server holds at once: a full queue plus a full batch per worker.
inline constexpr int kCapacity = kQueueCapacity + kStreams * kRequestsPerBatch;
inline constexpr int kClients = 2 * kCapacity;
// About 1 ms of compute per request here: the queue, not gRPC, sets the latency.
inline const std::vector<int> kLoadTopMlp = {1024, 256, 1};

// A model whose top MLP makes compute, not gRPC, the bottleneck.
TestModel LoadModel(uint64_t seed, std::vector<int> top_mlp);

// A valid random request with exactly `candidates` candidates.
v1::RankRequest RequestOf(const TestModel& model, uint64_t seed, int candidates);

struct Started {
  std::unique_ptr<server::Server> server;
  std::string target;
};

// The server on 127.0.0.1:0 (no admin or metrics port) with `engine` as its engine
// section; a null server after a test failure.
Started StartServer(const std::string& model_path, const std::string& engine, int max_candidates,
                    const std::string& name);

// kStreams workers, a queue of kQueueCapacity, batches of kMaxBatchCandidates.
std::string LoadEngineConfig();

// The load's requests, each checked against the double-precision reference on the idle
// server, and the exact bytes of its answer (batching must not change a bit of it).
struct Workload {
  std::vector<v1::RankRequest> requests;
  std::vector<std::string> expected;
  double single_seconds = 0;  // median latency of one request alone on the idle server
};

Workload PrepareWorkload(const TestModel& model, const std::string& target);

std::map<grpc::StatusCode, int> CountCodes(const std::vector<CallSample>& samples);
std::string Describe(const std::map<grpc::StatusCode, int>& counts);

// An async Rank call the test waits for.
struct AsyncCall {
  grpc::ClientContext context;
  v1::RankRequest request;
  v1::RankResponse response;
  grpc::Status status;
  absl::Notification done;

  void Send(v1::Ranker::Stub* stub, std::chrono::milliseconds deadline) {
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    stub->async()->Rank(&context, &request, &response, [this](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
  }
};

// The slow requests: a model with a wide top MLP, kSlowCandidates each, on a one-worker
// server.
inline constexpr int kSlowCandidates = 4096;
inline const std::vector<int> kSlowTopMlp = {1024, 1024, 1};
// No age limit: these requests wait in the queue for longer than the default one.
inline constexpr char kOneWorker[] =
    "{device: cpu, streams: 1, queue_capacity: 512, max_batch_candidates: 4096, "
    "max_queue_delay_ms: 0}";

// Sends every call of `calls` as a slow request to `server` and waits until `queued` of
// them wait in its queue (a fatal test failure when they never do).
void SendSlow(const TestModel& model, v1::Ranker::Stub* stub, const server::Server& server,
              std::vector<AsyncCall>* calls, int queued);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_LOAD_LOAD_SERVER_UTIL_H_
