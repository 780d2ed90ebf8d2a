// fuserank.v1.Admin, served on server.admin_listen. Every method first passes the bearer-
// token check (admin_auth.h) and is counted in fuserank_requests_total. The hot-row
// methods act on one served model's current version (request `model`, "" = the default):
// GetHotRows answers at once; SetHotRows and RebuildHotRows build sets (up to ~100 ms for
// very large ones) and wait for a reload of the model in progress
// (ServedModels::ChangeServingVersion), so they run on a thread of their own, as
// ReloadModel (ServedModels::Reload) does: gRPC's threads never block. Thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_SERVICE_H_
#define FUSERANK_SERVER_ADMIN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/hot_row_manager.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "server/admin_auth.h"
#include "server/metrics.h"
#include "server/served_models.h"

namespace fuserank::server {

class AdminService final : public v1::Admin::CallbackService {
 public:
  // `metrics` and `models` must outlive the service.
  AdminService(Metrics* metrics, ServedModels* models, AdminAuth auth);
  ~AdminService() override;  // waits for reloads in progress

  grpc::ServerUnaryReactor* SetHotRows(grpc::CallbackServerContext* context,
                                       const v1::SetHotRowsRequest* request,
                                       v1::HotRowsStatus* response) override;
  grpc::ServerUnaryReactor* GetHotRows(grpc::CallbackServerContext* context,
                                       const v1::GetHotRowsRequest* request,
                                       v1::HotRowsStatus* response) override;
  grpc::ServerUnaryReactor* RebuildHotRows(grpc::CallbackServerContext* context,
                                           const v1::RebuildHotRowsRequest* request,
                                           v1::HotRowsStatus* response) override;
  grpc::ServerUnaryReactor* ReloadModel(grpc::CallbackServerContext* context,
                                        const v1::ReloadModelRequest* request,
                                        v1::ReloadModelResponse* response) override;

 private:
  struct Background {
    std::thread thread;
    std::atomic<bool> done{false};
  };

  using Clock = std::chrono::steady_clock;

  // Finishes the call with `status`, counted under `rpc` with its time since `start`.
  void Complete(grpc::ServerUnaryReactor* reactor, Rpc rpc, Clock::time_point start,
                const absl::Status& status);
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, Rpc rpc,
                                   Clock::time_point start, const absl::Status& status);
  // The auth check, logged when it fails.
  absl::Status Authorize(const grpc::CallbackServerContext& context, absl::string_view method);
  // Runs `work` on a thread of its own (joined by the destructor).
  void RunInBackground(std::function<void()> work);
  // Called with the serving version of the model; returns the hot-row status after the
  // change (or why it was refused: then nothing changed).
  using HotRowsChange =
      std::function<absl::StatusOr<engine::HotRowsStatus>(const ServedModel& served)>;
  // SetHotRows / RebuildHotRows: authorizes, then runs `change` in the background under
  // ServedModels::ChangeServingVersion (never beside a reload of `model`), fills
  // `response`, logs the outcome and finishes the call, counted under `rpc`.
  grpc::ServerUnaryReactor* ChangeHotRows(grpc::CallbackServerContext* context, Rpc rpc,
                                          const char* method, const std::string& model,
                                          v1::HotRowsStatus* response, HotRowsChange change);

  Metrics* const metrics_;
  ServedModels* const models_;
  const AdminAuth auth_;

  absl::Mutex background_mu_;
  std::list<Background> background_ ABSL_GUARDED_BY(background_mu_);
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_SERVICE_H_
