#include "server/admin_service.h"

#include <grpcpp/support/proto_buffer_writer.h>

#include <algorithm>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/escape_text.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "engine/status_macros.h"
#include "server/admin_limits.h"
#include "server/grpc_status.h"
#include "server/tsan_handoff.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {
namespace {

void ToProto(const engine::HotRowsStatus& status, v1::HotRowsStatus* out) {
  out->set_version(status.version);
  for (const engine::TableHotRowsStatus& t : status.tables) {
    v1::TableHotRowsStatus* table = out->add_tables();
    table->set_table(t.table);
    table->set_hot_rows(t.hot_rows);
    table->set_capacity(t.capacity);
    table->set_hits(t.hits);
    table->set_misses(t.misses);
  }
}

// "model 'm': item_id 100, user_id 0; version 3" for the log.
std::string Describe(const ServedModel& served, const engine::HotRowsStatus& status) {
  std::vector<std::string> tables;
  for (const engine::TableHotRowsStatus& t : status.tables) {
    tables.push_back(absl::StrCat(t.table, " ", t.hot_rows, " rows"));
  }
  return absl::StrCat("model '", served.name, "': ", absl::StrJoin(tables, ", "),
                      "; hot-row version ", status.version);
}

// `result` of a hot-row call on `served`, an error naming the model as it is served (what
// the call's `model` addressed; the engine knows only its spec's name).
absl::StatusOr<engine::HotRowsStatus> OfModel(const ServedModel& served,
                                              absl::StatusOr<engine::HotRowsStatus> result) {
  if (result.ok()) return result;
  return WithContext(result.status(), absl::StrCat("model '", served.name, "'"));
}

absl::Status NeedsCache(const ServedModel& served) {
  if (served.hot_rows != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("model '", served.name, "' has no hot-row cache"));
}

// OK while the client still waits for the call's answer: else CANCELLED, or
// DEADLINE_EXCEEDED when its deadline has passed (gRPC cancels the call then too).
absl::Status StillWanted(grpc::CallbackServerContext* context) {
  if (context->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError(
        "the deadline passed while the call waited for the admin worker; nothing was done");
  }
  if (context->IsCancelled()) {
    return absl::CancelledError("the call was cancelled while it waited; nothing was done");
  }
  return absl::OkStatus();
}

}  // namespace

// One admin call: gRPC's reactor, and the response until Complete serializes it into
// gRPC's buffer. Admin work finishes on the admin worker while gRPC runs OnDone() and frees
// the call on one of its own threads: Finish() releases the call for TSan and OnDone()
// acquires it (server/tsan_handoff.h), so what the worker wrote is seen ordered before
// gRPC's thread frees it.
class AdminService::Call : public grpc::ServerUnaryReactor {
 public:
  explicit Call(grpc::ByteBuffer* response_bytes) : response_bytes_(response_bytes) {}
  void OnDone() override {
    FUSERANK_TSAN_ACQUIRE(this);
    delete this;
  }
  virtual const google::protobuf::MessageLite& response() const = 0;
  grpc::ByteBuffer* response_bytes() const { return response_bytes_; }

 private:
  grpc::ByteBuffer* const response_bytes_;  // gRPC's, valid until the call is done
};

// A call of one method: the request as parsed and the response, both as long as the call.
template <typename Request, typename Response>
class AdminService::TypedCall final : public AdminService::Call {
 public:
  using Call::Call;
  const google::protobuf::MessageLite& response() const override { return response_message; }

  Request request;
  Response response_message;
};

AdminService::AdminService(Metrics* metrics, ServedModels* models, AdminAuth auth,
                           int hot_rows_per_table)
    : metrics_(metrics),
      models_(models),
      auth_(std::move(auth)),
      hot_rows_per_table_(hot_rows_per_table) {}

AdminService::~AdminService() { StopWorker(); }

void AdminService::StartShutdown() {
  shutting_down_.store(true, std::memory_order_release);
  changes_.Close();
  reloads_.Close();
}

absl::Status AdminService::Admit(grpc::CallbackServerContext* context, absl::string_view method,
                                 const grpc::ByteBuffer* request) {
  if (shutting_down_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("the server is shutting down");
  }
  RETURN_IF_ERROR(Authorize(*context, method));
  if (request != nullptr && request->Valid()) return absl::OkStatus();
  if (context->IsCancelled()) return absl::CancelledError("the client cancelled the call");
  return absl::InvalidArgumentError(absl::StrCat("the ", method, " call carried no message"));
}

SetHotRowsBounds AdminService::SetBounds() const {
  size_t tables = 0;
  for (const ModelHandle& version : models_->Current()) {
    tables = std::max(tables, version->model->tables().size());
  }
  // protobuf parses no message past INT_MAX bytes.
  return {hot_rows_per_table_,
          std::min<int64_t>(LargestSetHotRowsBytes(hot_rows_per_table_, tables), INT_MAX)};
}

void AdminService::RunOnWorker(grpc::CallbackServerContext* context, AdminWorker* worker,
                               Call* call, Rpc rpc, Clock::time_point start, std::string what,
                               std::function<absl::Status()> work) {
  auto run = [this, call, rpc, start, work = std::move(work)]() -> AdminWorker::Answer {
    const absl::Status status = work();
    return [this, call, rpc, start, status] { Complete(call, rpc, start, status); };
  };
  // The context lives until the call is finished, which only drop or run's answer does.
  const absl::Status posted = worker->Post(
      {std::move(run),
       [this, call, rpc, start](const absl::Status& why) { Complete(call, rpc, start, why); },
       std::move(what), [context] { return StillWanted(context); }});
  if (!posted.ok()) Complete(call, rpc, start, posted);
}

void AdminService::Complete(Call* call, Rpc rpc, Clock::time_point start,
                            const absl::Status& status) {
  grpc::Status grpc_status = ToGrpcStatus(status);
  if (grpc_status.ok()) {
    bool own_buffer = false;
    const grpc::Status serialized =
        grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::MessageLite>(
            call->response(), call->response_bytes(), &own_buffer);
    if (!serialized.ok()) {
      grpc_status = ToGrpcStatus(absl::InternalError(
          absl::StrCat("cannot serialize the response: ", serialized.error_message())));
    }
  }
  metrics_->RecordRequest(rpc, grpc_status.error_code(),
                          std::chrono::duration<double>(Clock::now() - start).count());
  FUSERANK_TSAN_RELEASE(call);
  call->Finish(grpc_status);  // OnDone may run (on another thread) from here on
}

absl::Status AdminService::Authorize(const grpc::CallbackServerContext& context,
                                     absl::string_view method) {
  absl::Status status = auth_.Check(context);
  if (!status.ok()) auth_.LogRefusal(method, context.peer(), status);
  return status;
}

void AdminService::ChangeHotRows(grpc::CallbackServerContext* context, Call* call, Rpc rpc,
                                 Clock::time_point start, const char* method,
                                 const std::string& model, v1::HotRowsStatus* response,
                                 HotRowsChange change) {
  RunOnWorker(context, &changes_, call, rpc, start,
              absl::StrCat(method, " of model '", engine::EscapeText(model), "'"),
              [this, method, &model, response, peer = context->peer(),
               change = std::move(change)]() -> absl::Status {
                std::string done;
                const absl::Status status = models_->ChangeServingVersion(
                    model, [&](const ServedModel& served) -> absl::Status {
                      RETURN_IF_ERROR(NeedsCache(served));
                      absl::StatusOr<engine::HotRowsStatus> result = change(served);
                      if (!result.ok()) return result.status();
                      ToProto(*result, response);
                      done = Describe(served, *result);
                      return absl::OkStatus();
                    });
                if (status.ok()) {
                  spdlog::info("admin {} from {}: {}", method, peer, done);
                } else {
                  spdlog::warn("admin {} from {} refused, nothing changed: {}", method, peer,
                               std::string(status.message()));
                }
                return status;
              });
}

grpc::ServerUnaryReactor* AdminService::SetHotRows(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request_bytes,
                                                   grpc::ByteBuffer* response_bytes) {
  const Clock::time_point start = Clock::now();
  auto* call = new TypedCall<v1::SetHotRowsRequest, v1::HotRowsStatus>(response_bytes);
  absl::Status admitted = Admit(context, "SetHotRows", request_bytes);
  if (admitted.ok()) admitted = ReadSetHotRows(*request_bytes, SetBounds(), &call->request);
  if (!admitted.ok()) {
    Complete(call, Rpc::kSetHotRows, start, admitted);
    return call;
  }
  // The request lives until the call finishes, so the id spans stay valid in the background.
  const v1::SetHotRowsRequest* request = &call->request;
  ChangeHotRows(
      context, call, Rpc::kSetHotRows, start, "SetHotRows", request->model(),
      &call->response_message, [request](const ServedModel& served) {
        std::vector<engine::TableIds> tables;
        tables.reserve(request->tables_size());
        for (const v1::TableHotRows& t : request->tables()) {
          tables.push_back({t.table(), absl::MakeConstSpan(t.ids().data(), t.ids().size())});
        }
        return OfModel(served, served.hot_rows->Set(tables));
      });
  return call;
}

grpc::ServerUnaryReactor* AdminService::GetHotRows(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request_bytes,
                                                   grpc::ByteBuffer* response_bytes) {
  const Clock::time_point start = Clock::now();
  auto* call = new TypedCall<v1::GetHotRowsRequest, v1::HotRowsStatus>(response_bytes);
  absl::Status status = Admit(context, "GetHotRows", request_bytes);
  if (status.ok()) status = ReadSmallAdminRequest(*request_bytes, "GetHotRows", &call->request);
  if (status.ok()) {
    absl::StatusOr<ModelHandle> served = models_->Acquire(call->request.model());
    status = served.status();
    if (status.ok()) status = NeedsCache(**served);
    if (status.ok()) {
      const std::vector<std::string> tables(call->request.tables().begin(),
                                            call->request.tables().end());
      absl::StatusOr<engine::HotRowsStatus> result =
          OfModel(**served, (*served)->hot_rows->Get(tables));
      status = result.status();
      if (result.ok()) ToProto(*result, &call->response_message);
    }
  }
  Complete(call, Rpc::kGetHotRows, start, status);
  return call;
}

grpc::ServerUnaryReactor* AdminService::RebuildHotRows(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request_bytes,
                                                       grpc::ByteBuffer* response_bytes) {
  const Clock::time_point start = Clock::now();
  auto* call = new TypedCall<v1::RebuildHotRowsRequest, v1::HotRowsStatus>(response_bytes);
  absl::Status admitted = Admit(context, "RebuildHotRows", request_bytes);
  if (admitted.ok()) {
    admitted = ReadSmallAdminRequest(*request_bytes, "RebuildHotRows", &call->request);
  }
  if (!admitted.ok()) {
    Complete(call, Rpc::kRebuildHotRows, start, admitted);
    return call;
  }
  const v1::RebuildHotRowsRequest* request = &call->request;
  ChangeHotRows(
      context, call, Rpc::kRebuildHotRows, start, "RebuildHotRows", request->model(),
      &call->response_message,
      [request](const ServedModel& served) -> absl::StatusOr<engine::HotRowsStatus> {
        const std::vector<std::string> tables(request->tables().begin(), request->tables().end());
        if (!served.hot_rows->samples_accesses()) {
          // Unknown tables are NOT_FOUND whatever the policy (SPEC section 3).
          RETURN_IF_ERROR(OfModel(served, served.hot_rows->Get(tables)).status());
          // The static policy observes no accesses: a rebuild would empty every set.
          return absl::FailedPreconditionError(absl::StrCat(
              "model '", served.name,
              "': cache.policy is static, so no access frequencies are observed to rebuild "
              "from; set cache.policy: frequency, or install sets with SetHotRows"));
        }
        return OfModel(served, served.hot_rows->Rebuild(tables));
      });
  return call;
}

grpc::ServerUnaryReactor* AdminService::ReloadModel(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request_bytes,
                                                    grpc::ByteBuffer* response_bytes) {
  const Clock::time_point start = Clock::now();
  auto* call = new TypedCall<v1::ReloadModelRequest, v1::ReloadModelResponse>(response_bytes);
  absl::Status admitted = Admit(context, "ReloadModel", request_bytes);
  if (admitted.ok()) {
    admitted = ReadSmallAdminRequest(*request_bytes, "ReloadModel", &call->request);
  }
  if (!admitted.ok()) {
    Complete(call, Rpc::kReloadModel, start, admitted);
    return call;
  }
  const v1::ReloadModelRequest* request = &call->request;
  v1::ReloadModelResponse* response = &call->response_message;
  const std::string model = request->model().empty() ? models_->default_name() : request->model();
  const std::string what = absl::StrCat(
      "a reload of model '", engine::EscapeText(model), "' from ",
      request->path().empty() ? std::string("its current spec")
                              : absl::StrCat("'", engine::EscapeText(request->path()), "'"));
  RunOnWorker(context, &reloads_, call, Rpc::kReloadModel, start, what,
              [this, request, response, peer = context->peer()]() -> absl::Status {
                absl::StatusOr<ReloadResult> result =
                    models_->Reload(request->model(), request->path());
                if (!result.ok()) {
                  spdlog::error("admin ReloadModel from {}: {}", peer,
                                std::string(result.status().message()));
                  return result.status();
                }
                spdlog::info("admin ReloadModel from {}: {}", peer, result->message);
                response->set_model(result->model);
                response->set_model_version(result->version);
                response->set_message(result->message);
                return absl::OkStatus();
              });
  return call;
}

}  // namespace fuserank::server
