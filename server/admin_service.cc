#include "server/admin_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/grpc_status.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {

AdminService::AdminService(Metrics* metrics, ServedModels* models, AdminAuth auth)
    : metrics_(metrics), models_(models), auth_(std::move(auth)) {}

AdminService::~AdminService() {
  std::list<Background> background;
  {
    absl::MutexLock lock(&background_mu_);
    background.swap(background_);
  }
  for (Background& task : background) task.thread.join();
}

void AdminService::RunInBackground(std::function<void()> work) {
  absl::MutexLock lock(&background_mu_);
  for (auto it = background_.begin(); it != background_.end();) {  // join the finished
    if (it->done.load()) {
      it->thread.join();
      it = background_.erase(it);
    } else {
      ++it;
    }
  }
  Background& task = background_.emplace_back();
  task.thread = std::thread([work = std::move(work), &task] {
    work();
    task.done.store(true);
  });
}

grpc::ServerUnaryReactor* AdminService::Finish(grpc::CallbackServerContext* context, const Rpc* rpc,
                                               const absl::Status& status) {
  const grpc::Status grpc_status = ToGrpcStatus(status);
  if (rpc != nullptr) metrics_->RecordRequest(*rpc, grpc_status.error_code(), 0.0);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc_status);
  return reactor;
}

absl::Status AdminService::Authorize(const grpc::CallbackServerContext& context,
                                     absl::string_view method) {
  absl::Status status = auth_.Check(context);
  if (!status.ok()) {
    spdlog::warn("admin {} from {} refused: {}", std::string(method), context.peer(),
                 std::string(status.message()));
  }
  return status;
}

grpc::ServerUnaryReactor* AdminService::SetHotRows(grpc::CallbackServerContext* context,
                                                   const v1::SetHotRowsRequest*,
                                                   v1::HotRowsStatus*) {
  static constexpr Rpc kRpc = Rpc::kSetHotRows;
  absl::Status status = Authorize(*context, "SetHotRows");
  if (status.ok()) status = absl::UnimplementedError("hot-row admin is not implemented yet");
  return Finish(context, &kRpc, status);
}

grpc::ServerUnaryReactor* AdminService::GetHotRows(grpc::CallbackServerContext* context,
                                                   const v1::GetHotRowsRequest*,
                                                   v1::HotRowsStatus*) {
  static constexpr Rpc kRpc = Rpc::kGetHotRows;
  absl::Status status = Authorize(*context, "GetHotRows");
  if (status.ok()) status = absl::UnimplementedError("hot-row admin is not implemented yet");
  return Finish(context, &kRpc, status);
}

grpc::ServerUnaryReactor* AdminService::RebuildHotRows(grpc::CallbackServerContext* context,
                                                       const v1::RebuildHotRowsRequest*,
                                                       v1::HotRowsStatus*) {
  static constexpr Rpc kRpc = Rpc::kRebuildHotRows;
  absl::Status status = Authorize(*context, "RebuildHotRows");
  if (status.ok()) status = absl::UnimplementedError("hot-row admin is not implemented yet");
  return Finish(context, &kRpc, status);
}

grpc::ServerUnaryReactor* AdminService::ReloadModel(grpc::CallbackServerContext* context,
                                                    const v1::ReloadModelRequest* request,
                                                    v1::ReloadModelResponse* response) {
  // Not in fuserank_requests_total: server/metrics.h has no `rpc` label value for it yet.
  const absl::Status authorized = Authorize(*context, "ReloadModel");
  if (!authorized.ok()) return Finish(context, nullptr, authorized);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string peer = context->peer();
  RunInBackground([this, request, response, reactor, peer] {
    absl::StatusOr<ReloadResult> result = models_->Reload(request->model(), request->path());
    if (!result.ok()) {
      spdlog::error("admin ReloadModel from {}: {}", peer, std::string(result.status().message()));
      reactor->Finish(ToGrpcStatus(result.status()));
      return;
    }
    spdlog::info("admin ReloadModel from {}: {}", peer, result->message);
    response->set_model(result->model);
    response->set_model_version(result->version);
    response->set_message(result->message);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

}  // namespace fuserank::server
