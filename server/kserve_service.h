// inference.GRPCInferenceService, the KServe v2 / Triton gRPC protocol, on the ranking port
// beside fuserank.v1.Ranker (SPEC section 6; docs/kserve.md). ModelInfer reads top to
// bottom as RankerService::Rank does: raw bytes (server.max_request_bytes) -> parse into a
// pooled call -> find model and version -> admission -> decode (tensor_decoder) -> the
// model's batcher -> encode -> Finish, so it shares the batcher, the backend and the scores
// of Rank. The metadata calls (ServerLive, ServerReady, ModelReady, ServerMetadata,
// ModelMetadata, ModelConfig, RepositoryIndex) answer from the served models' specs
// (kserve_metadata.cc). An accepted ModelInfer counts as in flight until gRPC reports it
// done, so WaitIdle() never cuts off an accepted call.
// Thread-safe: gRPC calls every method from many threads; completions run on batcher
// threads.
#ifndef FUSERANK_SERVER_KSERVE_SERVICE_H_
#define FUSERANK_SERVER_KSERVE_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/batcher.h"
#include "engine/config_defaults.h"
#include "engine/object_pool.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/accept_gate.h"
#include "server/call_limiter.h"
#include "server/memory_trimmer.h"
#include "server/metrics.h"
#include "server/reply_watch.h"
#include "server/request_decoder.h"
#include "server/served_models.h"
#include "server/tensor_decoder.h"

namespace fuserank::server {

struct KServeOptions {
  int64_t max_request_bytes = defaults::kMaxRequestBytes;  // server.max_request_bytes
  DecodeLimits limits;         // server.max_candidates, server.max_ids_per_feature
  std::string server_version;  // ServerMetadata.version
  // The ranking port's bound on calls in flight (server.max_inflight_requests), shared with
  // Rank; null: no bound of its own. Must outlive the service.
  CallLimiter* limiter = nullptr;
  // Cancels calls whose client does not take the answer (server.reply_timeout_seconds);
  // null: none is. Must outlive the service.
  ReplyWatch* reply_watch = nullptr;
  double access_log_sample = defaults::kAccessLogSample;  // logging.access_log_sample
};

using KServeBase = inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
    inference::GRPCInferenceService::CallbackService>;

class KServeService final : public KServeBase {
 public:
  // `models` and `metrics` must outlive the service.
  KServeService(const ServedModels* models, Metrics* metrics, KServeOptions options);
  ~KServeService() override;

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

  // kserve_metadata.cc.
  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override;

  // From now on new ModelInfer calls get UNAVAILABLE and ServerReady says false; calls
  // already accepted complete normally.
  void StartShutdown();
  // Waits until no accepted ModelInfer is in flight or `deadline` passes; true when none is.
  bool WaitIdle(absl::Time deadline);

 private:
  struct Call;  // one ModelInfer's state and its reactor; pooled so protos keep capacity

  // The current version of model `name` ("" = default); `version` must be "" or its
  // version, else NOT_FOUND naming the version served. `field`: the request's field that
  // names the model ("model_name" in ModelInfer, "name" in the metadata calls), which an
  // unknown name's NOT_FOUND says to leave empty for the default.
  absl::StatusOr<ModelHandle> FindModel(const std::string& name, const std::string& version,
                                        absl::string_view field) const;
  // The tensor decoder of `model`'s version, built on its first request.
  std::shared_ptr<const TensorDecoder> DecoderFor(const ServedModel& model);

  // Everything up to the hand-off to the batcher. OK: the batcher owns `call` now.
  absl::Status Start(grpc::CallbackServerContext* context, const grpc::ByteBuffer& request,
                     Call* call);
  // Queue admission of one parsed, not yet decoded request, as Rank's: room for its
  // candidates (call.candidates) in the model's batcher (or, at once, RESOURCE_EXHAUSTED
  // naming the limit or DEADLINE_EXCEEDED for a predicted deadline miss).
  absl::StatusOr<engine::AdmissionTicket> Admit(const Call& call,
                                                engine::BatcherClock::time_point deadline);
  absl::Status Accept(Call* call);
  void Unaccept(Call* call);
  void OnScored(Call* call, const absl::Status& status, const engine::RequestResult& result);
  absl::Status Encode(Call* call, const engine::RequestResult& result);
  // The call's line in the metrics and the access log.
  void Record(const Call& call, grpc::StatusCode code, const std::string& message, double seconds);
  // Records the call (a call without a message: when it is done) and sends its status;
  // `call` belongs to gRPC until OnCallDone.
  void Finish(Call* call, const grpc::Status& status);
  // gRPC is done with the call: recorded if it had no message, back to the pool.
  void OnCallDone(Call* call);
  std::unique_ptr<Call> AcquireCall();
  void ReleaseCall(std::unique_ptr<Call> call);

  // Finishes a metadata call: records it and sends `status`.
  grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, Rpc rpc,
                                  engine::BatcherClock::time_point start,
                                  const absl::Status& status);

  const ServedModels* const models_;
  Metrics* const metrics_;
  const KServeOptions options_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> inflight_{0};  // calls handed to ModelInfer() and not yet done

  AcceptGate gate_;  // Accept() against StartShutdown(), WaitIdle()

  engine::ObjectPool<Call> pool_;
  MemoryTrimmer trimmer_;  // after large requests and spikes

  // Decoders by served model name, each for the version it was built from (compared by
  // identity: a weak_ptr keeps no retired model alive).
  struct CachedDecoder {
    std::weak_ptr<const engine::Model> model;
    std::shared_ptr<const TensorDecoder> decoder;
  };
  absl::Mutex decoders_mu_;
  absl::flat_hash_map<std::string, CachedDecoder> decoders_ ABSL_GUARDED_BY(decoders_mu_);
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_KSERVE_SERVICE_H_
