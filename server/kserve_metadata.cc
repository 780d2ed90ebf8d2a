// The metadata calls of KServeService (kserve_service.h): health, server and model
// metadata, Triton's ModelConfig and RepositoryIndex. They answer from the served models'
// current versions and never touch a batcher.
#include <chrono>
#include <string>

#include "server/grpc_status.h"
#include "server/kserve_service.h"
#include "server/kserve_tensors.h"

namespace fuserank::server {
namespace {

using Clock = engine::BatcherClock;

constexpr char kServerName[] = "fuserank";

}  // namespace

grpc::ServerUnaryReactor* KServeService::Reply(grpc::CallbackServerContext* context, Rpc rpc,
                                               Clock::time_point start,
                                               const absl::Status& status) {
  const grpc::Status reply = ToGrpcStatus(status);
  metrics_->RecordRequest(rpc, reply.error_code(),
                          std::chrono::duration<double>(Clock::now() - start).count());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(reply);
  return reactor;
}

grpc::ServerUnaryReactor* KServeService::ServerLive(grpc::CallbackServerContext* context,
                                                    const inference::ServerLiveRequest*,
                                                    inference::ServerLiveResponse* response) {
  const Clock::time_point start = Clock::now();
  response->set_live(true);  // it answers: it is live, even while it drains
  return Reply(context, Rpc::kServerLive, start, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ServerReady(grpc::CallbackServerContext* context,
                                                     const inference::ServerReadyRequest*,
                                                     inference::ServerReadyResponse* response) {
  const Clock::time_point start = Clock::now();
  // Every model is loaded and warmed up before the server listens; a model whose device
  // failed (engine.on_device_failure: fail) is not ready, nor is the server then.
  bool ready = !shutting_down_.load(std::memory_order_relaxed);
  for (const ModelHandle& model : models_->Current()) {
    if (!model->backend->health().ok()) ready = false;
  }
  response->set_ready(ready);
  return Reply(context, Rpc::kServerReady, start, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelReady(grpc::CallbackServerContext* context,
                                                    const inference::ModelReadyRequest* request,
                                                    inference::ModelReadyResponse* response) {
  const Clock::time_point start = Clock::now();
  // As Triton: an unknown model or version is not ready, and that is no error.
  const absl::StatusOr<ModelHandle> found = FindModel(request->name(), request->version(), "name");
  response->set_ready(found.ok() && (*found)->backend->health().ok() &&
                      !shutting_down_.load(std::memory_order_relaxed));
  return Reply(context, Rpc::kModelReady, start, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  const Clock::time_point start = Clock::now();
  response->set_name(kServerName);
  response->set_version(options_.server_version);
  response->add_extensions("model_configuration");  // ModelConfig
  response->add_extensions("parameters");           // the request parameter top_k
  return Reply(context, Rpc::kServerMetadata, start, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<ModelHandle> model = FindModel(request->name(), request->version(), "name");
  if (model.ok()) FillModelMetadata((*model)->name, (*model)->model->spec(), response);
  return Reply(context, Rpc::kModelMetadata, start, model.status());
}

grpc::ServerUnaryReactor* KServeService::ModelConfig(grpc::CallbackServerContext* context,
                                                     const inference::ModelConfigRequest* request,
                                                     inference::ModelConfigResponse* response) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<ModelHandle> model = FindModel(request->name(), request->version(), "name");
  if (model.ok()) {
    FillModelConfig((*model)->name, (*model)->model->spec(), response->mutable_config());
  }
  return Reply(context, Rpc::kModelConfig, start, model.status());
}

grpc::ServerUnaryReactor* KServeService::RepositoryIndex(
    grpc::CallbackServerContext* context, const inference::RepositoryIndexRequest* request,
    inference::RepositoryIndexResponse* response) {
  const Clock::time_point start = Clock::now();
  // One repository: the `models:` of the config. A model is READY when ModelReady says
  // ready; else UNAVAILABLE with the reason (a failed device's health, or the drain).
  // `ready`: only the ready ones, as Triton.
  const bool shutting_down = shutting_down_.load(std::memory_order_relaxed);
  for (const ModelHandle& model : models_->Current()) {
    const absl::Status health = shutting_down
                                    ? absl::UnavailableError("the server is shutting down")
                                    : model->backend->health();
    if (request->ready() && !health.ok()) continue;
    inference::RepositoryIndexResponse::ModelIndex* index = response->add_models();
    index->set_name(model->name);
    index->set_version(model->version());
    index->set_state(health.ok() ? "READY" : "UNAVAILABLE");
    if (!health.ok()) index->set_reason(std::string(health.message()));
  }
  return Reply(context, Rpc::kRepositoryIndex, start, absl::OkStatus());
}

}  // namespace fuserank::server
