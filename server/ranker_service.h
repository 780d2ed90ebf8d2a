// fuserank.v1.Ranker on the gRPC callback API: one Rank call reads top to bottom as
// in-flight bound -> size -> wire scan (request_scan) -> find model -> queue admission ->
// decode (request_decoder) -> queue (engine/batcher) -> backend -> encode -> Finish, and
// no thread waits for it in between. Everything that refuses a call runs before the
// request is decoded (docs/serving.md, "Admission"), so refusing costs little and an
// over-limit request is never read in full. The request is taken as raw bytes and decoded
// from them in place (no protobuf message is built); call states are pooled and keep only
// their response arena's first block, never the largest request seen.
// A call is accepted once it passes admission (not shutting down, queue not full, decoded);
// it then counts as in flight until gRPC reports it done (OnDone), so a drain that waits
// for WaitIdle() never cuts off an accepted call, nor a response still being sent. A client
// that cancels (or whose deadline passes) while its request waits in the queue costs no
// compute: the batcher drops it.
// Thread-safe: gRPC calls Rank() from many threads; completions run on batcher threads.
#ifndef FUSERANK_SERVER_RANKER_SERVICE_H_
#define FUSERANK_SERVER_RANKER_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/batcher.h"
#include "engine/config_defaults.h"
#include "engine/object_pool.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "server/accept_gate.h"
#include "server/call_limiter.h"
#include "server/memory_trimmer.h"
#include "server/metrics.h"
#include "server/rank_request_view.h"
#include "server/reply_watch.h"
#include "server/request_scan.h"
#include "server/served_models.h"

namespace fuserank::server {

struct RankerOptions {
  int64_t max_request_bytes = defaults::kMaxRequestBytes;  // server.max_request_bytes
  int max_candidates = defaults::kMaxCandidates;  // server.max_candidates (checked on the wire)
  int max_inflight_requests = 1024;               // server.max_inflight_requests, resolved (> 0)
  // The ranking port's shared bound (Rank and ModelInfer together), or null: then the
  // service bounds its own calls by max_inflight_requests. Must outlive the service.
  CallLimiter* limiter = nullptr;
  // Cancels calls whose client does not take the answer (server.reply_timeout_seconds);
  // null: none is. Must outlive the service.
  ReplyWatch* reply_watch = nullptr;
  double access_log_sample = defaults::kAccessLogSample;  // logging.access_log_sample
};

class RankerService final : public v1::Ranker::WithRawCallbackMethod_Rank<v1::Ranker::Service> {
 public:
  // `models` and `metrics` must outlive the service.
  RankerService(const ServedModels* models, Metrics* metrics, RankerOptions options);
  ~RankerService() override;

  grpc::ServerUnaryReactor* Rank(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;

  // From now on new calls get UNAVAILABLE; calls already accepted complete normally.
  void StartShutdown();
  // Waits until no accepted call is in flight (each answered and done at the transport)
  // or `deadline` passes; true when none is left. Calls refused meanwhile do not count.
  bool WaitIdle(absl::Time deadline);

 private:
  struct Call;  // one call's state and its reactor; pooled so protos keep their capacity

  // The checks before anything is admitted: shutting down, no message, deadline, size, the
  // top-level wire scan, the model (set in call->model). Sets `deadline` and `shape`.
  absl::Status CheckCall(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                         Call* call, engine::BatcherClock::time_point* deadline,
                         RequestShape* shape);
  // Everything up to the hand-off to the batcher. OK: the batcher owns `call` now.
  absl::Status Start(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                     Call* call);
  // Reads the request's bytes into `batch` (the one-pass decode of the shape clients send,
  // else the parse, or the scan's word on bytes that do not parse) and adds its ids to
  // `ticket`'s count in the queue; keeps what the answer and the access log need. On an
  // error `batch` may still hold the request: the caller releases it.
  absl::Status DecodeWire(const grpc::ByteBuffer& request, Call* call, RequestShape* shape,
                          engine::AdmissionTicket* ticket, engine::Batch* batch);
  // Decodes the parsed request into `batch`; keeps what the answer and the access log need
  // (item ids, request id, counts).
  absl::Status Decode(const RankRequestView& request, Call* call, engine::Batch* batch);
  // The last step of admission: refused (UNAVAILABLE) once StartShutdown() has run, else
  // the call is accepted and WaitIdle() waits for it.
  absl::Status Accept(Call* call);
  void Unaccept(Call* call);
  void OnScored(Call* call, const absl::Status& status, const engine::RequestResult& result);
  absl::Status Encode(Call* call, const engine::RequestResult& result);
  // The call's line in the metrics and the access log.
  void Record(const Call& call, grpc::StatusCode code, const std::string& message, double seconds);
  // Records the call and sends its status; `call` belongs to gRPC until OnCallDone.
  void Finish(Call* call, const grpc::Status& status);
  // gRPC is done with the call: back to the pool, no longer in flight.
  void OnCallDone(Call* call);

  std::unique_ptr<Call> AcquireCall();
  void ReleaseCall(std::unique_ptr<Call> call);

  const ServedModels* const models_;
  Metrics* const metrics_;
  const RankerOptions options_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> inflight_{0};  // calls handed to Rank() and not yet done
  MemoryTrimmer trimmer_;         // after large requests and spikes

  AcceptGate gate_;  // Accept() against StartShutdown(), WaitIdle()

  engine::ObjectPool<Call> pool_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_RANKER_SERVICE_H_
