#include "server/kserve_service.h"

#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/status_macros.h"
#include "server/grpc_status.h"
#include "server/infer_message_bytes.h"
#include "server/infer_request_scan.h"
#include "server/infer_response.h"
#include "server/kserve_tensors.h"
#include "server/logging.h"
#include "server/missing_message.h"
#include "server/tsan_handoff.h"
#include "server/wire_bytes.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {
namespace {

using Clock = engine::BatcherClock;

constexpr size_t kMaxPooledCalls = 256;
// Calls whose protos hold more than this (capacity included) are freed, not pooled.
constexpr size_t kMaxPooledCallBytes = size_t{1} << 20;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The call's gRPC deadline on the batcher's clock (max() when there is none).
Clock::time_point SteadyDeadline(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  const auto system_now = std::chrono::system_clock::now();
  if (deadline >= system_now + std::chrono::hours(24)) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(deadline - system_now);
}

bool SameModel(const std::weak_ptr<const engine::Model>& a,
               const std::shared_ptr<const engine::Model>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

}  // namespace

struct KServeService::Call {
  // A reactor serves one call only, so it is rebuilt in place for each (no allocation).
  class Reactor final : public grpc::ServerUnaryReactor {
   public:
    Reactor(KServeService* service, Call* call) : service_(service), call_(call) {}
    void OnCancel() override {
      call_->cancelled.store(true, std::memory_order_release);
      FUSERANK_TSAN_RELEASE(call_);  // gRPC runs OnDone after this, maybe on another thread
    }
    void OnDone() override { service_->OnCallDone(call_); }  // destroys *this

   private:
    KServeService* const service_;
    Call* const call_;
  };

  inference::ModelInferRequest request;
  inference::ModelInferResponse response;
  std::optional<Reactor> reactor;
  grpc::ByteBuffer* response_buffer = nullptr;
  ModelHandle model;
  std::shared_ptr<const TensorDecoder> decoder;
  InferRequestInfo info;
  TensorDecoder::WireInputs scanned;  // where CheckWire found each input
  RequestedOutputs outputs;
  std::string model_name;  // for the access log: the serving model's (as requested until found)
  // For the access log: the candidates the request holds, from item_ids' shape once it is
  // parsed (0 for a call refused before its parse).
  int64_t candidates = 0;
  MissingMessage missing{"inference.ModelInferRequest"};
  std::atomic<bool> cancelled{false};
  ReplyWatch::Entry watch;  // its context from the start, listed from Finish() to OnDone
  bool accepted = false;
  size_t wire_bytes = 0;     // the request's, on the wire
  size_t request_bytes = 0;  // on the wire, and what parsing may have made of it
  Clock::time_point start;
  // Bytes each position of the request's inputs and raw contents and of the response's
  // outputs holds, capacity included. Clear() keeps the messages and strings past a
  // request's counts for the next parse to reuse, with their capacity, which no longer
  // changes while they are hidden: a position's last visible figure stays exact.
  absl::InlinedVector<size_t, 32> input_bytes;
  absl::InlinedVector<size_t, 32> raw_bytes;
  absl::InlinedVector<size_t, 4> requested_bytes;  // the request's `outputs`
  std::array<size_t, kNumOutputs> output_bytes{};

  // What the messages hold, capacity included, from protobuf's public API (Message::
  // SpaceUsedLong reads map fields through code whose layout differs between Debian's
  // libprotobuf and a TSan build, and crashed there).
  size_t HeldBytes() {
    size_t bytes = request.id().capacity() + request.model_name().capacity() +
                   request.model_version().capacity() + ParameterBytes(request.parameters());
    if (requested_bytes.size() < static_cast<size_t>(request.outputs_size())) {
      requested_bytes.resize(static_cast<size_t>(request.outputs_size()));
    }
    for (int i = 0; i < request.outputs_size(); ++i) {
      requested_bytes[i] =
          request.outputs(i).name().capacity() + ParameterBytes(request.outputs(i).parameters());
    }
    for (const size_t b : requested_bytes) bytes += b;
    if (input_bytes.size() < static_cast<size_t>(request.inputs_size())) {
      input_bytes.resize(static_cast<size_t>(request.inputs_size()));
    }
    for (int i = 0; i < request.inputs_size(); ++i) input_bytes[i] = InputBytes(request.inputs(i));
    if (raw_bytes.size() < static_cast<size_t>(request.raw_input_contents_size())) {
      raw_bytes.resize(static_cast<size_t>(request.raw_input_contents_size()));
    }
    for (int i = 0; i < request.raw_input_contents_size(); ++i) {
      raw_bytes[i] = request.raw_input_contents(i).capacity();
    }
    for (int i = 0; i < response.raw_output_contents_size() && i < kNumOutputs; ++i) {
      output_bytes[i] = response.raw_output_contents(i).capacity();
    }
    for (const size_t b : input_bytes) bytes += b;
    for (const size_t b : raw_bytes) bytes += b;
    for (const size_t b : output_bytes) bytes += b;
    return bytes + response.id().capacity() + response.model_name().capacity() +
           response.model_version().capacity();
  }
};

KServeService::KServeService(const ServedModels* models, Metrics* metrics, KServeOptions options)
    : models_(models),
      metrics_(metrics),
      options_(std::move(options)),
      // A call that held a large request keeps its protos' capacity: it is freed instead
      // of pooled, so the pool never holds the largest size ever seen.
      pool_(engine::ObjectPoolLimits{.max_objects = kMaxPooledCalls,
                                     .max_object_bytes = kMaxPooledCallBytes},
            [](Call& call) -> size_t {
              call.model.reset();  // a retired version is freed once its last call lets go
              call.decoder.reset();
              call.response_buffer = nullptr;
              return call.HeldBytes();
            }) {}

KServeService::~KServeService() {
  // gRPC's server is gone by now, but a refused call's OnDone (WaitIdle() waits only for
  // accepted ones) may still be on its way out of the service: wait for it, bounded.
  for (int i = 0; i < 10000 && inflight_.load(std::memory_order_acquire) > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
}

grpc::ServerUnaryReactor* KServeService::ModelInfer(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  Call* call = AcquireCall().release();  // gRPC's until OnDone hands it back to the pool
  call->start = Clock::now();
  call->watch.context = context;
  call->response_buffer = response;
  call->cancelled.store(false, std::memory_order_relaxed);
  call->accepted = false;
  call->request.Clear();
  call->info = InferRequestInfo{};
  call->model_name.clear();
  call->candidates = 0;
  call->missing.Reset();
  call->wire_bytes = request != nullptr && request->Valid() ? request->Length() : 0;
  call->request_bytes = call->wire_bytes;
  trimmer_.CallReceived(call->wire_bytes);
  grpc::ServerUnaryReactor* reactor = &call->reactor.emplace(this, call);
  metrics_->AddInflight(1);
  inflight_.fetch_add(1, std::memory_order_relaxed);
  // The first bound, before anything reads the request, shared with Rank.
  absl::Status status;
  if (options_.limiter != nullptr && !options_.limiter->Enter()) {
    status = absl::ResourceExhaustedError(absl::StrCat(
        "too many calls in flight (server.max_inflight_requests = ", options_.limiter->limit(),
        "); retry with backoff"));
  } else if (request == nullptr || !request->Valid()) {
    status = call->missing.Answer(context->IsCancelled());  // most often: cancelled first
  } else {
    status = Start(context, *request, call);
  }
  if (!status.ok()) Finish(call, ToGrpcStatus(status));
  return reactor;
}

absl::StatusOr<ModelHandle> KServeService::FindModel(const std::string& name,
                                                     const std::string& version,
                                                     absl::string_view field) const {
  ASSIGN_OR_RETURN(ModelHandle model, models_->Acquire(name, field));
  if (!version.empty() && version != model->version()) {
    return absl::NotFoundError(absl::StrCat("model '", model->name, "' has no version '", version,
                                            "' (serving version '", model->version(),
                                            "'; an empty version means that one)"));
  }
  return model;
}

std::shared_ptr<const TensorDecoder> KServeService::DecoderFor(const ServedModel& model) {
  {
    absl::MutexLock lock(&decoders_mu_);
    auto it = decoders_.find(model.name);
    if (it != decoders_.end() && SameModel(it->second.model, model.model)) {
      return it->second.decoder;
    }
  }
  // The first request of a version (or of a reload's new one): build outside the lock.
  auto decoder = std::make_shared<const TensorDecoder>(*model.model, options_.limits, model.name);
  absl::MutexLock lock(&decoders_mu_);
  decoders_[model.name] = CachedDecoder{model.model, decoder};
  return decoder;
}

absl::StatusOr<engine::AdmissionTicket> KServeService::Admit(const Call& call,
                                                             Clock::time_point deadline) {
  // Overloaded: refuse before spending a decode on a request the queue cannot take. The
  // candidate count is the shape of `item_ids` (the decoder checks it against the rest).
  const int64_t candidates = call.candidates;
  if (candidates <= 0) return engine::AdmissionTicket();  // no candidates: nothing queues
  if (candidates > options_.limits.max_candidates) {
    // The decoder refuses it with the limit's message; hold no room for it meanwhile.
    return engine::AdmissionTicket();
  }
  return call.model->batcher->Admit(deadline, static_cast<int>(candidates));
}

absl::Status KServeService::Start(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer& request, Call* call) {
  if (shutting_down_.load(std::memory_order_relaxed)) {
    return absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  const Clock::time_point deadline = SteadyDeadline(*context);
  if (deadline <= call->start) {
    return absl::DeadlineExceededError(
        "the deadline passed before the request was read; it was not computed");
  }
  const size_t bytes = request.Length();
  if (bytes > static_cast<size_t>(options_.max_request_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("the request is ", bytes,
                                                   " bytes, more than server.max_request_bytes (",
                                                   options_.max_request_bytes, ")"));
  }
  // The scan before the parse (infer_request_scan.h): what no valid request holds is
  // refused before protobuf builds it; then the model's own bounds on its inputs.
  const WireBytes wire(request);
  InferRequestTop top;
  RETURN_IF_ERROR(ScanInferTop(wire.view(), &top));
  call->model_name.assign(top.model_name.data(), top.model_name.size());  // for the access log
  ASSIGN_OR_RETURN(call->model, FindModel(std::string(top.model_name),
                                          std::string(top.model_version), "model_name"));
  call->model_name = call->model->name;  // the model that serves it (the default's name too)
  call->decoder = DecoderFor(*call->model);
  RETURN_IF_ERROR(call->decoder->CheckWire(wire.view(), &top, &call->scanned));
  // 1-byte varints parse into 8-byte values: large enough to give back after it is done.
  call->request_bytes += static_cast<size_t>(8 * top.values);
  if (!call->request.ParseFromArray(wire.view().data(), static_cast<int>(wire.view().size()))) {
    return absl::InvalidArgumentError(
        "the request is not a valid inference.ModelInferRequest: protobuf cannot parse it");
  }
  call->candidates = ItemIdsShape(call->request);
  RETURN_IF_ERROR(SelectOutputs(call->request.outputs(), call->model->name, &call->outputs));
  engine::Batcher& batcher = *call->model->batcher;
  ASSIGN_OR_RETURN(engine::AdmissionTicket ticket, Admit(*call, deadline));
  std::unique_ptr<engine::Batch> batch = batcher.AcquireBatch();
  absl::Status decoded = call->decoder->Append(call->request, call->model->model, batch.get(),
                                               &call->info, &call->scanned);
  metrics_->RecordStage(Stage::kDecode, SecondsSince(call->start));
  if (decoded.ok()) call->candidates = call->info.num_candidates;
  if (decoded.ok() && ticket.valid()) {
    decoded = batcher.AddIds(
        &ticket, static_cast<int64_t>(batch->user.rows.size() + batch->item.rows.size()));
  } else if (decoded.ok() && batch->num_candidates() > 0) {
    ASSIGN_OR_RETURN(ticket, batcher.Admit(deadline, batch->num_candidates()));  // not seen before
  }
  absl::Status accepted = decoded;
  if (accepted.ok()) accepted = Accept(call);
  if (!accepted.ok() || batch->num_candidates() == 0) {
    batcher.ReleaseBatch(std::move(batch));
    if (!accepted.ok()) return accepted;
    OnScored(call, absl::OkStatus(), engine::RequestResult{});  // no candidates: empty outputs
    return absl::OkStatus();
  }
  const absl::Status queued = batcher.Submit(
      std::move(batch), deadline,
      [this, call](const absl::Status& status, const engine::RequestResult& result) {
        OnScored(call, status, result);
      },
      &call->cancelled, std::move(ticket));
  if (!queued.ok()) Unaccept(call);  // refused after all (shutting down meanwhile)
  return queued;
}

absl::Status KServeService::Accept(Call* call) {
  RETURN_IF_ERROR(gate_.Accept());
  call->accepted = true;
  return absl::OkStatus();
}

void KServeService::Unaccept(Call* call) {
  gate_.Done();
  call->accepted = false;
}

void KServeService::OnScored(Call* call, const absl::Status& status,
                             const engine::RequestResult& result) {
  metrics_->RecordResult(result);
  if (!status.ok()) {
    Finish(call, ToGrpcStatus(status));
    return;
  }
  const Clock::time_point encode_start = Clock::now();
  const absl::Status encoded = Encode(call, result);
  metrics_->RecordStage(Stage::kEncode, SecondsSince(encode_start));
  Finish(call, ToGrpcStatus(encoded));
}

absl::Status KServeService::Encode(Call* call, const engine::RequestResult& result) {
  const ServedModel& model = *call->model;
  RETURN_IF_ERROR(FillInferResponse({model.name, model.version(), call->request.id()},
                                    call->outputs, result.items, call->info.item_ids,
                                    &call->response));
  const inference::ModelInferResponse& response = call->response;
  bool own_buffer = false;
  const grpc::Status serialized =
      grpc::GenericSerialize<grpc::ProtoBufferWriter, inference::ModelInferResponse>(
          response, call->response_buffer, &own_buffer);
  if (!serialized.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot serialize the response: ", serialized.error_message()));
  }
  return absl::OkStatus();
}

void KServeService::Record(const Call& call, grpc::StatusCode code, const std::string& message,
                           double seconds) {
  metrics_->RecordRequest(Rpc::kModelInfer, code, seconds);
  if (AccessLogSampled(options_.access_log_sample)) {
    // As Rank's line (ranker_service.cc); the id is empty for a call refused before its
    // request was parsed, the model for one refused before its bytes were scanned, and
    // the candidates are 0 for a call refused before its parse.
    spdlog::info("infer request_id='{}' model='{}' candidates={} code={} ms={:.3f}",
                 LogQuoted(call.request.id(), 128), LogQuoted(call.model_name, 128),
                 call.candidates, std::string(GrpcCodeName(code)), seconds * 1e3);
    if (code != grpc::StatusCode::OK) {
      spdlog::debug("infer request_id='{}' error={}", LogQuoted(call.request.id(), 128),
                    LogSafe(message, 512));
    }
  }
}

void KServeService::Finish(Call* call, const grpc::Status& status) {
  const double seconds = SecondsSince(call->start);
  if (call->missing.CountAtFinish(seconds)) {
    Record(*call, status.error_code(), status.error_message(), seconds);
  }  // else counted in OnCallDone
  if (options_.reply_watch != nullptr) options_.reply_watch->Watch(&call->watch);
  FUSERANK_TSAN_RELEASE(call);
  call->reactor->Finish(status);  // OnDone may run (on another thread) from here on
}

void KServeService::OnCallDone(Call* call) {
  FUSERANK_TSAN_ACQUIRE(call);  // everything written before Finish() is visible here
  if (options_.reply_watch != nullptr) options_.reply_watch->Done(&call->watch);
  call->reactor.reset();  // inside its OnDone: nothing touches it after this
  if (call->missing.pending()) {
    const bool cancelled = call->cancelled.load(std::memory_order_acquire);
    Record(*call, call->missing.code(cancelled), call->missing.message(cancelled),
           call->missing.seconds());
  }
  const bool accepted = call->accepted;
  trimmer_.CallDone(call->wire_bytes, call->request_bytes);
  ReleaseCall(std::unique_ptr<Call>(call));
  metrics_->AddInflight(-1);
  if (accepted) gate_.Done();
  if (options_.limiter != nullptr) options_.limiter->Leave();
  // Last: from here on the service may be destroyed.
  inflight_.fetch_sub(1, std::memory_order_release);
}

void KServeService::StartShutdown() {
  shutting_down_.store(true);
  gate_.Refuse();
}

bool KServeService::WaitIdle(absl::Time deadline) { return gate_.WaitIdle(deadline); }

std::unique_ptr<KServeService::Call> KServeService::AcquireCall() { return pool_.Acquire(); }

void KServeService::ReleaseCall(std::unique_ptr<Call> call) { pool_.Release(std::move(call)); }

}  // namespace fuserank::server
