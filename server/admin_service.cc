#include "server/admin_service.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/escape_text.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "engine/status_macros.h"
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

// The reactor of one admin call. Admin work finishes on the admin worker while gRPC runs
// OnDone() and frees the call's messages on one of its own threads: Finish() releases the
// call for TSan and OnDone() acquires it (server/tsan_handoff.h), so what the worker wrote
// into the response is seen ordered before gRPC's thread frees it.
class AdminReactor final : public grpc::ServerUnaryReactor {
 public:
  void OnDone() override {
    FUSERANK_TSAN_ACQUIRE(this);
    delete this;
  }
};

}  // namespace

AdminService::AdminService(Metrics* metrics, ServedModels* models, AdminAuth auth)
    : metrics_(metrics), models_(models), auth_(std::move(auth)) {}

AdminService::~AdminService() { StopWorker(); }

void AdminService::StartShutdown() {
  shutting_down_.store(true, std::memory_order_release);
  changes_.Close();
  reloads_.Close();
}

absl::Status AdminService::Admit(const grpc::CallbackServerContext& context,
                                 absl::string_view method) {
  if (shutting_down_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("the server is shutting down");
  }
  return Authorize(context, method);
}

void AdminService::RunOnWorker(grpc::CallbackServerContext* context, AdminWorker* worker,
                               grpc::ServerUnaryReactor* reactor, Rpc rpc, Clock::time_point start,
                               std::string what, std::function<absl::Status()> work) {
  auto run = [this, reactor, rpc, start, work = std::move(work)]() -> AdminWorker::Answer {
    const absl::Status status = work();
    return [this, reactor, rpc, start, status] { Complete(reactor, rpc, start, status); };
  };
  // The context lives until the call is finished, which only drop or run's answer does.
  const absl::Status posted = worker->Post(
      {std::move(run),
       [this, reactor, rpc, start](const absl::Status& why) { Complete(reactor, rpc, start, why); },
       std::move(what), [context] { return StillWanted(context); }});
  if (!posted.ok()) Complete(reactor, rpc, start, posted);
}

void AdminService::Complete(grpc::ServerUnaryReactor* reactor, Rpc rpc, Clock::time_point start,
                            const absl::Status& status) {
  const grpc::Status grpc_status = ToGrpcStatus(status);
  metrics_->RecordRequest(rpc, grpc_status.error_code(),
                          std::chrono::duration<double>(Clock::now() - start).count());
  FUSERANK_TSAN_RELEASE(reactor);
  reactor->Finish(grpc_status);  // OnDone may run (on another thread) from here on
}

grpc::ServerUnaryReactor* AdminService::Finish(grpc::CallbackServerContext* context, Rpc rpc,
                                               Clock::time_point start,
                                               const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = new AdminReactor();
  Complete(reactor, rpc, start, status);
  return reactor;
}

absl::Status AdminService::Authorize(const grpc::CallbackServerContext& context,
                                     absl::string_view method) {
  absl::Status status = auth_.Check(context);
  if (!status.ok()) auth_.LogRefusal(method, context.peer(), status);
  return status;
}

grpc::ServerUnaryReactor* AdminService::ChangeHotRows(grpc::CallbackServerContext* context, Rpc rpc,
                                                      const char* method, const std::string& model,
                                                      v1::HotRowsStatus* response,
                                                      HotRowsChange change) {
  const Clock::time_point start = Clock::now();
  const absl::Status admitted = Admit(*context, method);
  if (!admitted.ok()) return Finish(context, rpc, start, admitted);
  grpc::ServerUnaryReactor* reactor = new AdminReactor();
  RunOnWorker(context, &changes_, reactor, rpc, start,
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
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::SetHotRows(grpc::CallbackServerContext* context,
                                                   const v1::SetHotRowsRequest* request,
                                                   v1::HotRowsStatus* response) {
  // `request` lives until the call finishes, so the id spans stay valid in the background.
  return ChangeHotRows(
      context, Rpc::kSetHotRows, "SetHotRows", request->model(), response,
      [request](const ServedModel& served) {
        std::vector<engine::TableIds> tables;
        tables.reserve(request->tables_size());
        for (const v1::TableHotRows& t : request->tables()) {
          tables.push_back({t.table(), absl::MakeConstSpan(t.ids().data(), t.ids().size())});
        }
        return OfModel(served, served.hot_rows->Set(tables));
      });
}

grpc::ServerUnaryReactor* AdminService::GetHotRows(grpc::CallbackServerContext* context,
                                                   const v1::GetHotRowsRequest* request,
                                                   v1::HotRowsStatus* response) {
  const Clock::time_point start = Clock::now();
  absl::Status status = Admit(*context, "GetHotRows");
  if (status.ok()) {
    absl::StatusOr<ModelHandle> served = models_->Acquire(request->model());
    status = served.status();
    if (status.ok()) status = NeedsCache(**served);
    if (status.ok()) {
      const std::vector<std::string> tables(request->tables().begin(), request->tables().end());
      absl::StatusOr<engine::HotRowsStatus> result =
          OfModel(**served, (*served)->hot_rows->Get(tables));
      status = result.status();
      if (result.ok()) ToProto(*result, response);
    }
  }
  return Finish(context, Rpc::kGetHotRows, start, status);
}

grpc::ServerUnaryReactor* AdminService::RebuildHotRows(grpc::CallbackServerContext* context,
                                                       const v1::RebuildHotRowsRequest* request,
                                                       v1::HotRowsStatus* response) {
  return ChangeHotRows(
      context, Rpc::kRebuildHotRows, "RebuildHotRows", request->model(), response,
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
}

grpc::ServerUnaryReactor* AdminService::ReloadModel(grpc::CallbackServerContext* context,
                                                    const v1::ReloadModelRequest* request,
                                                    v1::ReloadModelResponse* response) {
  const Clock::time_point start = Clock::now();
  const absl::Status admitted = Admit(*context, "ReloadModel");
  if (!admitted.ok()) return Finish(context, Rpc::kReloadModel, start, admitted);
  grpc::ServerUnaryReactor* reactor = new AdminReactor();
  const std::string model = request->model().empty() ? models_->default_name() : request->model();
  const std::string what = absl::StrCat(
      "a reload of model '", engine::EscapeText(model), "' from ",
      request->path().empty() ? std::string("its current spec")
                              : absl::StrCat("'", engine::EscapeText(request->path()), "'"));
  RunOnWorker(context, &reloads_, reactor, Rpc::kReloadModel, start, what,
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
  return reactor;
}

}  // namespace fuserank::server
