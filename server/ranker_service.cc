#include "server/ranker_service.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/status_macros.h"
#include "server/grpc_status.h"
#include "server/logging.h"
#include "server/missing_message.h"
#include "server/rank_request_fault.h"
#include "server/rank_request_view.h"
#include "server/request_decoder.h"
#include "server/request_scan.h"
#include "server/tsan_handoff.h"
#include "server/wire_bytes.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {
namespace {

using Clock = engine::BatcherClock;

// Calls kept in the pool. Each keeps its response arena's first block and item ids of at
// most server.max_candidates candidates.
constexpr size_t kMaxPooledCalls = 256;
constexpr size_t kArenaFirstBlock = 16 << 10;
// Strings of the request kept for the access log.
constexpr size_t kLoggedChars = 128;

google::protobuf::ArenaOptions ArenaOptions(char* first_block, size_t size) {
  google::protobuf::ArenaOptions options;
  options.initial_block = first_block;
  options.initial_block_size = size;
  options.start_block_size = 64 << 10;  // beyond the first block: few, large blocks
  options.max_block_size = 1 << 20;
  return options;
}

// Reads the bytes of `request` as a stream; `copy` shares its slices.
class WireStream {
 public:
  explicit WireStream(const grpc::ByteBuffer& request) : copy_(request), reader_(&copy_) {}
  google::protobuf::io::ZeroCopyInputStream* stream() { return &reader_; }

 private:
  grpc::ByteBuffer copy_;
  grpc::ProtoBufferReader reader_;
};

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

}  // namespace

struct RankerService::Call {
  // A reactor serves one call only, so it is rebuilt in place for each (no allocation).
  class Reactor final : public grpc::ServerUnaryReactor {
   public:
    Reactor(RankerService* service, Call* call) : service_(service), call_(call) {}
    // The client cancelled or its deadline passed: the batcher drops the request if it
    // has not run yet.
    void OnCancel() override {
      call_->cancelled.store(true, std::memory_order_release);
      FUSERANK_TSAN_RELEASE(call_);  // gRPC runs OnDone after this, maybe on another thread
    }
    void OnDone() override { service_->OnCallDone(call_); }  // destroys *this

   private:
    RankerService* const service_;
    Call* const call_;
  };

  Call() : arena(ArenaOptions(first_block, kArenaFirstBlock)) {}

  // The response is built in `arena`; Reset() frees all but the first block.
  alignas(std::max_align_t) char first_block[kArenaFirstBlock];
  google::protobuf::Arena arena;
  std::vector<int64_t> item_ids;  // of the candidates, in request order, for the answer
  std::string request_id;         // its first kLoggedChars, for the access log
  std::string model_name;         // the serving model's (as requested until found), likewise
  int candidates = 0;
  uint32_t top_k = 0;
  size_t request_bytes = 0;
  MissingMessage missing{"fuserank.v1.RankRequest"};
  std::optional<Reactor> reactor;
  grpc::ByteBuffer* response_buffer = nullptr;
  ModelHandle model;  // the version that decodes, scores and answers this call
  std::atomic<bool> cancelled{false};
  ReplyWatch::Entry watch;  // its context from the start, listed from Finish() to OnDone
  bool accepted = false;    // WaitIdle() waits for it
  Clock::time_point start;
};

RankerService::RankerService(const ServedModels* models, Metrics* metrics, RankerOptions options)
    : models_(models),
      metrics_(metrics),
      options_(options),
      pool_(engine::ObjectPoolLimits{.max_objects = kMaxPooledCalls}, [](Call& call) -> size_t {
        call.model.reset();  // a retired version is freed once its last call lets go
        call.response_buffer = nullptr;
        call.arena.Reset();  // the response; keeps only the first block
        return 0;            // bounded by count alone (see kMaxPooledCalls)
      }) {}

RankerService::~RankerService() {
  // gRPC's server is gone by now, but a refused call's OnDone (WaitIdle() waits only for
  // accepted ones) may still be on its way out of the service: wait for it, bounded.
  for (int i = 0; i < 10000 && inflight_.load(std::memory_order_acquire) > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
}

grpc::ServerUnaryReactor* RankerService::Rank(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  Call* call = AcquireCall().release();  // gRPC's until OnDone hands it back to the pool
  call->start = Clock::now();
  call->watch.context = context;
  call->response_buffer = response;
  call->cancelled.store(false, std::memory_order_relaxed);
  call->accepted = false;
  call->item_ids.clear();
  call->request_id.clear();
  call->model_name.clear();
  call->candidates = 0;
  call->top_k = 0;
  call->request_bytes = request != nullptr && request->Valid() ? request->Length() : 0;
  trimmer_.CallReceived(call->request_bytes);
  call->missing.Reset();
  grpc::ServerUnaryReactor* reactor = &call->reactor.emplace(this, call);
  metrics_->AddInflight(1);
  // The first bound, before anything reads the request: calls handed over and not done
  // (on the whole ranking port when the limiter is shared).
  const int inflight = inflight_.fetch_add(1, std::memory_order_relaxed) + 1;
  const bool within = options_.limiter != nullptr ? options_.limiter->Enter()
                                                  : inflight <= options_.max_inflight_requests;
  absl::Status status;
  if (!within) {
    status = absl::ResourceExhaustedError(absl::StrCat(
        "too many calls in flight (server.max_inflight_requests = ",
        options_.limiter != nullptr ? options_.limiter->limit() : options_.max_inflight_requests,
        "); retry with backoff"));
  } else {
    status = Start(context, request, call);
  }
  if (!status.ok()) Finish(call, ToGrpcStatus(status));
  return reactor;
}

absl::Status RankerService::CheckCall(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request, Call* call,
                                      Clock::time_point* deadline, RequestShape* shape) {
  if (shutting_down_.load(std::memory_order_relaxed)) {
    return absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  if (request == nullptr || !request->Valid()) {
    return call->missing.Answer(context->IsCancelled());  // most often: cancelled first
  }
  *deadline = SteadyDeadline(*context);
  if (*deadline <= call->start) {
    return absl::DeadlineExceededError(
        "the deadline passed before the request was read; it was not computed");
  }
  const size_t bytes = request->Length();
  if (bytes > static_cast<size_t>(options_.max_request_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("the request is ", bytes,
                                                   " bytes, more than server.max_request_bytes (",
                                                   options_.max_request_bytes, ")"));
  }
  RETURN_IF_ERROR(ScanTopLevel(WireStream(*request).stream(), options_.max_candidates, shape));
  call->model_name = shape->model.substr(0, kLoggedChars);
  ASSIGN_OR_RETURN(call->model, models_->Acquire(shape->model));
  call->model_name = call->model->name;  // the model that serves it (the default's name too)
  return absl::OkStatus();
}

absl::Status RankerService::Start(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request, Call* call) {
  Clock::time_point deadline;
  RequestShape shape;
  RETURN_IF_ERROR(CheckCall(context, request, call, &deadline, &shape));
  engine::Batcher& batcher = *call->model->batcher;
  // Overloaded: refuse before the request costs a parse. A request without candidates
  // never queues.
  engine::AdmissionTicket ticket;
  if (shape.candidates > 0) {
    ASSIGN_OR_RETURN(ticket, batcher.Admit(deadline, shape.candidates));
  }
  // From here on the request is read in place, from one contiguous run of its bytes.
  std::unique_ptr<engine::Batch> batch = batcher.AcquireBatch();
  absl::Status accepted = DecodeWire(*request, call, &shape, &ticket, batch.get());
  metrics_->RecordStage(Stage::kDecode, SecondsSince(call->start));
  if (accepted.ok()) accepted = Accept(call);
  if (!accepted.ok() || batch->num_candidates() == 0) {
    batcher.ReleaseBatch(std::move(batch));
    if (!accepted.ok()) return accepted;
    // No candidates: an empty answer, nothing queued.
    OnScored(call, absl::OkStatus(), engine::RequestResult{});
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

absl::Status RankerService::DecodeWire(const grpc::ByteBuffer& request, Call* call,
                                       RequestShape* shape, engine::AdmissionTicket* ticket,
                                       engine::Batch* batch) {
  engine::Batcher& batcher = *call->model->batcher;
  const RequestDecoder& decoder = *call->model->decoder;
  const WireBytes wire(request);
  // The shape clients send goes straight into the batch; its ids then join the queue's
  // count, and a refusal there undoes it (the caller releases the batch).
  CanonicalRequest read;
  if (decoder.AppendCanonical(wire.view(), batch, &call->item_ids, &read)) {
    const absl::string_view request_id = read.request_id.substr(0, kLoggedChars);
    call->request_id.assign(request_id.data(), request_id.size());
    call->candidates = read.candidates;
    call->top_k = read.top_k;
    shape->ids = read.ids;
    if (ticket->valid()) RETURN_IF_ERROR(batcher.AddIds(ticket, shape->ids));
    return absl::OkStatus();
  }
  // Any other bytes are parsed once, within the feature scan's limits. A parse that
  // succeeds is a request the scan passes (request_scan.h); else the scan runs to say why
  // (its messages come first, as they always did), and bytes it passes are no
  // RankRequest.
  const ThreadRankRequestView parsed;
  const bool is_request = ParseRankRequest(wire.view(), decoder.parse_bounds(), &*parsed);
  if (is_request) {
    shape->ids = static_cast<int64_t>(parsed->ids.size());
  } else {
    google::protobuf::io::ArrayInputStream bytes(wire.view().data(),
                                                 static_cast<int>(wire.view().size()));
    RETURN_IF_ERROR(ScanFeatures(&bytes, decoder.scan_limits(), shape));
  }
  if (ticket->valid()) RETURN_IF_ERROR(batcher.AddIds(ticket, shape->ids));
  return is_request ? Decode(*parsed, call, batch) : NotARankRequest(wire.view());
}

absl::Status RankerService::Decode(const RankRequestView& request, Call* call,
                                   engine::Batch* batch) {
  const absl::string_view request_id = request.request_id.substr(0, kLoggedChars);
  call->request_id.assign(request_id.data(), request_id.size());
  call->candidates = static_cast<int>(request.candidates.size());
  call->top_k = request.top_k;
  return call->model->decoder->AppendParsed(request, batch, &call->item_ids);
}

absl::Status RankerService::Accept(Call* call) {
  RETURN_IF_ERROR(gate_.Accept());
  call->accepted = true;
  return absl::OkStatus();
}

void RankerService::Unaccept(Call* call) {
  gate_.Done();
  call->accepted = false;
}

void RankerService::OnScored(Call* call, const absl::Status& status,
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

absl::Status RankerService::Encode(Call* call, const engine::RequestResult& result) {
  v1::RankResponse& response =
      *google::protobuf::Arena::CreateMessage<v1::RankResponse>(&call->arena);
  const int n = static_cast<int>(call->item_ids.size());
  response.mutable_items()->Reserve(static_cast<int>(result.items.size()));
  for (const engine::ScoredIndex& scored : result.items) {
    if (scored.index >= static_cast<uint32_t>(n)) {
      return absl::InternalError(
          absl::StrCat("the engine returned candidate ", scored.index, " of a request with ", n));
    }
    v1::ScoredItem* item = response.add_items();
    item->set_item_id(call->item_ids[scored.index]);
    item->set_score(scored.score);
    item->set_index(scored.index);
  }
  response.set_model_version(call->model->version());
  bool own_buffer = false;
  const grpc::Status serialized = grpc::GenericSerialize<grpc::ProtoBufferWriter, v1::RankResponse>(
      response, call->response_buffer, &own_buffer);
  if (!serialized.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot serialize the response: ", serialized.error_message()));
  }
  return absl::OkStatus();
}

void RankerService::Record(const Call& call, grpc::StatusCode code, const std::string& message,
                           double seconds) {
  metrics_->RecordRequest(Rpc::kRank, code, seconds);
  if (AccessLogSampled(options_.access_log_sample)) {
    // Request-supplied strings are quoted safely; the error text, which may name a feature
    // id (an oov: reject table), only at debug level.
    spdlog::info("rank request_id='{}' model='{}' candidates={} top_k={} code={} ms={:.3f}",
                 LogQuoted(call.request_id, 128), LogQuoted(call.model_name, 128), call.candidates,
                 call.top_k, std::string(GrpcCodeName(code)), seconds * 1e3);
    if (code != grpc::StatusCode::OK) {
      spdlog::debug("rank request_id='{}' error={}", LogQuoted(call.request_id, 128),
                    LogSafe(message, 512));
    }
  }
}

void RankerService::Finish(Call* call, const grpc::Status& status) {
  const double seconds = SecondsSince(call->start);
  if (call->missing.CountAtFinish(seconds)) {
    Record(*call, status.error_code(), status.error_message(), seconds);
  }  // else counted in OnCallDone
  if (options_.reply_watch != nullptr) options_.reply_watch->Watch(&call->watch);
  FUSERANK_TSAN_RELEASE(call);
  call->reactor->Finish(status);  // OnDone may run (on another thread) from here on
}

void RankerService::OnCallDone(Call* call) {
  FUSERANK_TSAN_ACQUIRE(call);  // everything written before Finish() is visible here
  if (options_.reply_watch != nullptr) options_.reply_watch->Done(&call->watch);
  call->reactor.reset();  // we are inside its OnDone: nothing touches it after this
  if (call->missing.pending()) {
    const bool cancelled = call->cancelled.load(std::memory_order_acquire);
    Record(*call, call->missing.code(cancelled), call->missing.message(cancelled),
           call->missing.seconds());
  }
  const bool accepted = call->accepted;
  trimmer_.CallDone(call->request_bytes, call->request_bytes);
  ReleaseCall(std::unique_ptr<Call>(call));
  metrics_->AddInflight(-1);
  if (accepted) gate_.Done();
  if (options_.limiter != nullptr) options_.limiter->Leave();
  // Last: from here on the service may be destroyed.
  inflight_.fetch_sub(1, std::memory_order_release);
}

void RankerService::StartShutdown() {
  shutting_down_.store(true);
  gate_.Refuse();
}

bool RankerService::WaitIdle(absl::Time deadline) { return gate_.WaitIdle(deadline); }

std::unique_ptr<RankerService::Call> RankerService::AcquireCall() { return pool_.Acquire(); }

void RankerService::ReleaseCall(std::unique_ptr<Call> call) { pool_.Release(std::move(call)); }

}  // namespace fuserank::server
