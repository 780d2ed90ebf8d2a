// fuserank.v1.Admin, served on server.admin_listen. Every method first passes the bearer-
// token check (admin_auth.h; refusals logged rate-limited) and is counted in
// fuserank_requests_total. The hot-row methods act on one served model's current version
// (request `model`, "" = the default): GetHotRows answers at once; SetHotRows and
// RebuildHotRows build sets (up to ~100 ms for very large ones), so they run on the admin
// worker of hot-set changes (admin_worker.h): gRPC's threads never block, and with
// kAdminQueueCapacity calls waiting the next is RESOURCE_EXHAUSTED. ReloadModel
// (ServedModels::Reload) loads and builds a whole version (seconds to minutes), so it runs
// on a worker of its own, one reload at a time and none waiting: a reload posted while one
// runs is RESOURCE_EXHAUSTED naming the reload in progress, and a reload never delays a
// hot-row call (a change of the model being reloaded goes to the serving version and is
// carried over to the new one: ServedModels::ChangeServingVersion). A call that waited for
// its worker is not run when the client has gone meanwhile (cancelled: CANCELLED; deadline
// passed: DEADLINE_EXCEEDED), so nothing changes that the client was told failed. From
// StartShutdown() on every call is UNAVAILABLE. Every method takes its request as bytes
// and parses it only after the token check, within the bounds of admin_requests.h (a
// SetHotRows over capacity: INVALID_ARGUMENT naming it). Thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_SERVICE_H_
#define FUSERANK_SERVER_ADMIN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "server/admin_auth.h"
#include "server/admin_requests.h"
#include "server/admin_worker.h"
#include "server/metrics.h"
#include "server/served_models.h"

namespace fuserank::server {

// Admin calls that may wait for the worker at once (beyond the one it runs).
inline constexpr int kAdminQueueCapacity = 8;

class AdminService final
    : public v1::Admin::WithRawCallbackMethod_SetHotRows<
          v1::Admin::WithRawCallbackMethod_GetHotRows<
              v1::Admin::WithRawCallbackMethod_RebuildHotRows<
                  v1::Admin::WithRawCallbackMethod_ReloadModel<v1::Admin::Service>>>> {
 public:
  // `metrics` and `models` must outlive the service. `hot_rows_per_table`: the capacity
  // of every hot set (cache.hot_rows_per_table), which SetHotRows is checked against.
  AdminService(Metrics* metrics, ServedModels* models, AdminAuth auth, int hot_rows_per_table);
  ~AdminService() override;  // waits for the calls in progress; queued ones: UNAVAILABLE

  const AdminAuth& auth() const { return auth_; }
  // First thing at shutdown: every later call gets UNAVAILABLE at once and the queued ones
  // are answered UNAVAILABLE; the calls in progress go on. Idempotent.
  void StartShutdown();
  // Before the admin server stops: StartShutdown(), then waits for the calls in progress
  // (a reload included). Idempotent.
  void StopWorker() {
    StartShutdown();
    changes_.Stop();
    reloads_.Stop();
  }

  grpc::ServerUnaryReactor* SetHotRows(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetHotRows(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RebuildHotRows(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ReloadModel(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;

 private:
  using Clock = std::chrono::steady_clock;
  class Call;  // one call: its reactor, request and response (admin_service.cc)
  template <typename Request, typename Response>
  class TypedCall;

  // Finishes the call with `status` (OK: with its response), counted under `rpc` with its
  // time since `start`.
  void Complete(Call* call, Rpc rpc, Clock::time_point start, const absl::Status& status);
  // The auth check, logged when it fails.
  absl::Status Authorize(const grpc::CallbackServerContext& context, absl::string_view method);
  // UNAVAILABLE from StartShutdown() on, else the auth check, else, when the call came
  // without its message, CANCELLED (the client cancelled first) or INVALID_ARGUMENT.
  absl::Status Admit(grpc::CallbackServerContext* context, absl::string_view method,
                     const grpc::ByteBuffer* request);
  // What a SetHotRows is checked against now (the served models' most tables).
  SetHotRowsBounds SetBounds() const;
  // Runs `work` on `worker` and finishes the call with the status it returns, once the
  // worker is free again; or finishes the call at once with the worker's refusal (busy,
  // shutting down); a call dropped at shutdown gets UNAVAILABLE, one whose client has gone
  // by its turn CANCELLED or DEADLINE_EXCEEDED (`work` not run). `what` names the work for
  // the refusal of a call posted while it runs.
  void RunOnWorker(grpc::CallbackServerContext* context, AdminWorker* worker, Call* call, Rpc rpc,
                   Clock::time_point start, std::string what, std::function<absl::Status()> work);
  // Called with the serving version of the model; returns the hot-row status after the
  // change (or why it was refused: then nothing changed).
  using HotRowsChange =
      std::function<absl::StatusOr<engine::HotRowsStatus>(const ServedModel& served)>;
  // SetHotRows / RebuildHotRows, once admitted: runs `change` in the background under
  // ServedModels::ChangeServingVersion (never beside a reload of `model`), fills
  // `response`, logs the outcome and finishes the call, counted under `rpc`.
  void ChangeHotRows(grpc::CallbackServerContext* context, Call* call, Rpc rpc,
                     Clock::time_point start, const char* method, const std::string& model,
                     v1::HotRowsStatus* response, HotRowsChange change);

  Metrics* const metrics_;
  ServedModels* const models_;
  const AdminAuth auth_;
  const int hot_rows_per_table_;
  std::atomic<bool> shutting_down_{false};
  // Last: stopped first.
  AdminWorker changes_{kAdminQueueCapacity, "hot-set changes"};
  AdminWorker reloads_{0, "reloads"};
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_SERVICE_H_
