// fuserank.v1.Admin, served on server.admin_listen. The hot-row cache it operates is not
// built yet, so every method answers UNIMPLEMENTED (and is counted in the metrics).
// Thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_SERVICE_H_
#define FUSERANK_SERVER_ADMIN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "fuserank/v1/admin.grpc.pb.h"
#include "server/metrics.h"

namespace fuserank::server {

class AdminService final : public v1::Admin::CallbackService {
 public:
  explicit AdminService(Metrics* metrics) : metrics_(metrics) {}

  grpc::ServerUnaryReactor* SetHotRows(grpc::CallbackServerContext* context,
                                       const v1::SetHotRowsRequest* request,
                                       v1::HotRowsStatus* response) override;
  grpc::ServerUnaryReactor* GetHotRows(grpc::CallbackServerContext* context,
                                       const v1::GetHotRowsRequest* request,
                                       v1::HotRowsStatus* response) override;
  grpc::ServerUnaryReactor* RebuildHotRows(grpc::CallbackServerContext* context,
                                           const v1::RebuildHotRowsRequest* request,
                                           v1::HotRowsStatus* response) override;

 private:
  grpc::ServerUnaryReactor* Unimplemented(grpc::CallbackServerContext* context, Rpc rpc);

  Metrics* const metrics_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_SERVICE_H_
