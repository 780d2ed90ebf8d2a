// The whole fuserank server in one object: metrics, the served models (backend, decoder,
// batcher each), the Ranker + KServe v2 (inference.GRPCInferenceService) + health +
// reflection gRPC server on server.listen and the
// Admin server on server.admin_listen. main() runs one; tests run several in-process on
// 127.0.0.1:0. Start/Shutdown from one thread; the ports and metrics are safe to read.
#ifndef FUSERANK_SERVER_SERVER_H_
#define FUSERANK_SERVER_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/admin_service.h"
#include "server/config.h"
#include "server/hot_row_metrics.h"
#include "server/kserve_service.h"
#include "server/metrics.h"
#include "server/model_loader.h"
#include "server/model_watcher.h"
#include "server/ranker_service.h"
#include "server/reply_watch.h"
#include "server/served_models.h"
#include "server/serving_limits.h"

namespace fuserank::server {

// What a caller can change in how a server is built besides its config.
struct ServerHooks {
  // Builds every version's backend instead of engine::CreateBackend (tests inject
  // backends through it); null: the engine's.
  BackendFactory create_backend;
  // Runs once Start has loaded every model, just before the gRPC ports open (main() ends
  // its start phase there: a stop signal then drains instead of exiting); null: nothing.
  std::function<void()> before_listening;
};

class Server {
 public:
  // Loads the models, creates their backends and starts serving. Any failure (a model
  // that does not load, an address that cannot be bound, engine.device: cuda without a
  // GPU) is returned before anything listens for good; a gRPC address already in use is
  // refused before the models load.
  // Health on the ranking port (grpc.health.v1: the server, fuserank.v1.Ranker,
  // inference.GRPCInferenceService) is SERVING until Shutdown(), except while a served
  // version's backend reports a failed device (engine.on_device_failure: fail;
  // guarded_backend.h): NOT_SERVING then. On the admin port (the server,
  // fuserank.v1.Admin) it is SERVING until Shutdown().
  static absl::StatusOr<std::unique_ptr<Server>> Start(const Config& config,
                                                       ServerHooks hooks = {});
  ~Server();  // Shutdown()

  // Health NOT_SERVING on both ports, new calls refused (UNAVAILABLE), calls in flight
  // given up to server.shutdown_grace_seconds to finish, then everything stopped and the
  // time it took logged (nothing logged for a server whose Start failed). Idempotent.
  void Shutdown();

  // The bound ports (the real ones when the config said port 0); 0: not serving.
  int port() const { return port_; }
  int admin_port() const { return admin_port_; }
  int metrics_port() const { return metrics_->port(); }
  Metrics& metrics() { return *metrics_; }
  const ServedModels& models() const { return *models_; }
  ServedModels& mutable_models() { return *models_; }

 private:
  explicit Server(Config config) : config_(std::move(config)) {}
  // Listens on server.listen and server.admin_listen with `credentials` (server.tls).
  absl::Status StartGrpc(const ServingLimits& limits,
                         const std::shared_ptr<grpc::ServerCredentials>& credentials);
  // Sets health from the current versions' backends (see Start), unless shut down.
  void RefreshHealth();

  const Config config_;
  // Destroyed bottom-up: servers, then services, then models (batchers), then metrics.
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<ServedModels> models_;
  std::unique_ptr<HotRowMetrics> hot_row_metrics_;  // reads models_ when metrics_ is scraped
  std::unique_ptr<ModelWatcher> watcher_;           // null when model.watch_interval_seconds is 0
  // The ranking port's bound on calls in flight; outlives both services that share it.
  std::unique_ptr<CallLimiter> call_limiter_;
  // Cancels the ranking port's calls whose answer is not taken; outlives both services.
  std::unique_ptr<ReplyWatch> reply_watch_;
  std::unique_ptr<RankerService> ranker_;
  std::unique_ptr<KServeService> kserve_;  // on the ranking port, into the same batchers
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<grpc::Server> admin_server_;
  int port_ = 0;
  int admin_port_ = 0;
  bool started_ = false;  // Start succeeded: Shutdown() logs
  // Guards the health services' statuses: set from backend workers and reloads too.
  absl::Mutex health_mu_;
  grpc::HealthCheckServiceInterface* health_ ABSL_GUARDED_BY(health_mu_) = nullptr;
  grpc::HealthCheckServiceInterface* admin_health_ ABSL_GUARDED_BY(health_mu_) = nullptr;
  bool health_final_ ABSL_GUARDED_BY(health_mu_) = false;  // shutting down
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

// What Start refuses that can be checked without serving, by the functions Start runs
// (--check-config, after the config itself): the admin token file (AdminAuth), the TLS
// files, and every model: its spec and weights inside the model roots, regular files of
// the sizes the spec implies, its memory estimate within model.memory_budget_bytes beside
// the models before it, its spec and weights loaded and validated (no backend: neither
// engine.device nor the warm-up, and no port, are tried). Errors name the file, the key and
// the reason. `warnings`, when given, receives what the start would warn of (a token file
// others can read, a token in clear text on a public admin address), each naming the file.
absl::Status CheckConfigForStart(const Config& config,
                                 std::vector<std::string>* warnings = nullptr);

// Loads the models and creates a backend, decoder and batcher for each (model_loader.h,
// with the resolved engine.streams and the engine's id and queue budgets); records
// fuserank_model_info in `metrics`, which must outlive the result.
// `on_device_failed` (may be null) runs when a version reacts to a failed device.
absl::StatusOr<std::unique_ptr<ServedModels>> LoadServedModels(
    const Config& config, Metrics* metrics, const ServerHooks& hooks = {},
    std::function<void()> on_device_failed = nullptr);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_SERVER_H_
