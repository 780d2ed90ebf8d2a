#include "server/ranker_service.h"

#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <chrono>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "server/grpc_status.h"
#include "spdlog/spdlog.h"

// ThreadSanitizer cannot see gRPC order Finish() before OnDone(): the hand-off runs in
// Debian's uninstrumented gRPC core. These tell it, in TSan builds only.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define FUSERANK_TSAN_RELEASE(p) __tsan_release(p)
#define FUSERANK_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define FUSERANK_TSAN_RELEASE(p) static_cast<void>(p)
#define FUSERANK_TSAN_ACQUIRE(p) static_cast<void>(p)
#endif

namespace fuserank::server {
namespace {

using Clock = engine::BatcherClock;

// Calls kept in the pool: each keeps the capacity of the largest request it held.
constexpr size_t kMaxPooledCalls = 256;

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

bool Sampled(double fraction) {
  if (fraction <= 0) return false;
  thread_local std::minstd_rand rng(std::random_device{}());
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < fraction;
}

}  // namespace

struct RankerService::Call {
  // A reactor serves one call only, so it is rebuilt in place for each (no allocation).
  class Reactor final : public grpc::ServerUnaryReactor {
   public:
    Reactor(RankerService* service, Call* call) : service_(service), call_(call) {}
    // The client cancelled or its deadline passed: the batcher drops the request if it
    // has not run yet.
    void OnCancel() override { call_->cancelled.store(true, std::memory_order_release); }
    void OnDone() override { service_->OnCallDone(call_); }  // destroys *this

   private:
    RankerService* const service_;
    Call* const call_;
  };

  v1::RankRequest request;
  v1::RankResponse response;
  std::optional<Reactor> reactor;
  grpc::ByteBuffer* response_buffer = nullptr;
  ModelHandle model;  // the version that decodes, scores and answers this call
  std::atomic<bool> cancelled{false};
  bool accepted = false;  // WaitIdle() waits for it
  Clock::time_point start;
};

RankerService::RankerService(const ServedModels* models, Metrics* metrics, RankerOptions options)
    : models_(models), metrics_(metrics), options_(options) {}

RankerService::~RankerService() = default;

grpc::ServerUnaryReactor* RankerService::Rank(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  Call* call = AcquireCall().release();  // gRPC's until OnDone hands it back to the pool
  call->start = Clock::now();
  call->response_buffer = response;
  call->cancelled.store(false, std::memory_order_relaxed);
  call->accepted = false;
  call->request.Clear();
  grpc::ServerUnaryReactor* reactor = &call->reactor.emplace(this, call);
  metrics_->AddInflight(1);
  const absl::Status status = Start(context, *request, call);
  if (!status.ok()) Finish(call, ToGrpcStatus(status));
  return reactor;
}

absl::Status RankerService::Start(grpc::CallbackServerContext* context,
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
  grpc::ByteBuffer wire(request);  // shares the slices; parsing consumes this copy
  const grpc::Status parsed =
      grpc::GenericDeserialize<grpc::ProtoBufferReader, v1::RankRequest>(&wire, &call->request);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request is not a valid fuserank.v1.RankRequest: ", parsed.error_message()));
  }
  ASSIGN_OR_RETURN(call->model, models_->Acquire(call->request.model()));
  engine::Batcher& batcher = *call->model->batcher;
  // Overloaded: refuse before spending a decode on a request the queue cannot take.
  RETURN_IF_ERROR(batcher.Admission());
  std::unique_ptr<engine::Batch> batch = batcher.AcquireBatch();
  const absl::Status decoded = call->model->decoder->Append(call->request, batch.get());
  metrics_->RecordStage(Stage::kDecode, SecondsSince(call->start));
  absl::Status accepted = decoded;
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
      &call->cancelled);
  if (!queued.ok()) Unaccept(call);  // refused after all (the queue filled meanwhile)
  metrics_->SetQueueDepth(models_->QueueDepth());
  return queued;
}

absl::Status RankerService::Accept(Call* call) {
  absl::MutexLock lock(&accepted_mu_);
  if (refusing_) {
    return absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  ++accepted_;
  call->accepted = true;
  return absl::OkStatus();
}

void RankerService::Unaccept(Call* call) {
  absl::MutexLock lock(&accepted_mu_);
  --accepted_;
  call->accepted = false;
}

void RankerService::OnScored(Call* call, const absl::Status& status,
                             const engine::RequestResult& result) {
  if (result.batch_requests > 0) {  // it ran in a batch (dropped requests did not)
    metrics_->RecordStage(Stage::kQueue, result.queue_seconds);
    if (result.position == 0) {  // once per batch
      metrics_->RecordBatchCandidates(result.batch_candidates);
      if (result.graph_capture_failures > 0) {
        metrics_->AddGraphCaptureFailures(result.graph_capture_failures);
      }
      metrics_->RecordStage(Stage::kLookup, result.stages.lookup);
      metrics_->RecordStage(Stage::kCross, result.stages.cross);
      metrics_->RecordStage(Stage::kDnn, result.stages.dnn);
      metrics_->RecordStage(Stage::kTopk, result.stages.topk);
    }
  }
  metrics_->SetQueueDepth(models_->QueueDepth());
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
  v1::RankResponse& response = call->response;
  response.Clear();
  const int n = call->request.candidates_size();
  response.mutable_items()->Reserve(static_cast<int>(result.items.size()));
  for (const engine::ScoredIndex& scored : result.items) {
    if (scored.index >= static_cast<uint32_t>(n)) {
      return absl::InternalError(
          absl::StrCat("the engine returned candidate ", scored.index, " of a request with ", n));
    }
    v1::ScoredItem* item = response.add_items();
    item->set_item_id(call->request.candidates(static_cast<int>(scored.index)).item_id());
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

void RankerService::Finish(Call* call, const grpc::Status& status) {
  const double seconds = SecondsSince(call->start);
  metrics_->RecordRequest(Rpc::kRank, status.error_code(), seconds);
  if (Sampled(options_.access_log_sample)) {
    spdlog::info("rank request_id='{}' model='{}' candidates={} top_k={} code={} ms={:.3f}{}{}",
                 call->request.request_id().substr(0, 128), call->request.model().substr(0, 128),
                 call->request.candidates_size(), call->request.top_k(),
                 std::string(GrpcCodeName(status.error_code())), seconds * 1e3,
                 status.ok() ? "" : " error=", status.error_message());
  }
  FUSERANK_TSAN_RELEASE(call);
  call->reactor->Finish(status);  // OnDone may run (on another thread) from here on
}

void RankerService::OnCallDone(Call* call) {
  FUSERANK_TSAN_ACQUIRE(call);  // everything written before Finish() is visible here
  call->reactor.reset();        // we are inside its OnDone: nothing touches it after this
  const bool accepted = call->accepted;
  ReleaseCall(std::unique_ptr<Call>(call));
  metrics_->AddInflight(-1);
  if (accepted) {
    absl::MutexLock lock(&accepted_mu_);
    --accepted_;
  }
}

void RankerService::StartShutdown() {
  shutting_down_.store(true);
  absl::MutexLock lock(&accepted_mu_);
  refusing_ = true;
}

bool RankerService::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&accepted_mu_);
  auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return accepted_ == 0; };
  return accepted_mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

std::unique_ptr<RankerService::Call> RankerService::AcquireCall() {
  {
    absl::MutexLock lock(&pool_mu_);
    if (!pool_.empty()) {
      std::unique_ptr<Call> call = std::move(pool_.back());
      pool_.pop_back();
      return call;
    }
  }
  return std::make_unique<Call>();
}

void RankerService::ReleaseCall(std::unique_ptr<Call> call) {
  call->model.reset();  // a retired version is freed once its last call lets go
  call->response_buffer = nullptr;
  absl::MutexLock lock(&pool_mu_);
  if (pool_.size() < kMaxPooledCalls) pool_.push_back(std::move(call));
}

}  // namespace fuserank::server
