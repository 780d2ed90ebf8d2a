// fuserank.v1.Admin, served on server.admin_listen. Every method first passes the bearer-
// token check (admin_auth.h). ReloadModel swaps in a new model version (ServedModels::
// Reload) on a thread of its own, so that a load of seconds never blocks gRPC's threads.
// The hot-row cache is not built yet: its three methods answer UNIMPLEMENTED (once
// authenticated) and are counted in the metrics. Thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_SERVICE_H_
#define FUSERANK_SERVER_ADMIN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <list>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
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

  // Finishes the call with `status`; counted under `rpc` when given.
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, const Rpc* rpc,
                                   const absl::Status& status);
  // The auth check, logged when it fails.
  absl::Status Authorize(const grpc::CallbackServerContext& context, absl::string_view method);
  // Runs `work` on a thread of its own (joined by the destructor).
  void RunInBackground(std::function<void()> work);

  Metrics* const metrics_;
  ServedModels* const models_;
  const AdminAuth auth_;

  absl::Mutex background_mu_;
  std::list<Background> background_ ABSL_GUARDED_BY(background_mu_);
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_SERVICE_H_
