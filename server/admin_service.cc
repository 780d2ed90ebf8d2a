#include "server/admin_service.h"

#include "absl/status/status.h"
#include "server/grpc_status.h"

namespace fuserank::server {

grpc::ServerUnaryReactor* AdminService::Unimplemented(grpc::CallbackServerContext* context,
                                                      Rpc rpc) {
  const grpc::Status status =
      ToGrpcStatus(absl::UnimplementedError("hot-row admin is not implemented yet"));
  metrics_->RecordRequest(rpc, status.error_code(), 0.0);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::SetHotRows(grpc::CallbackServerContext* context,
                                                   const v1::SetHotRowsRequest*,
                                                   v1::HotRowsStatus*) {
  return Unimplemented(context, Rpc::kSetHotRows);
}

grpc::ServerUnaryReactor* AdminService::GetHotRows(grpc::CallbackServerContext* context,
                                                   const v1::GetHotRowsRequest*,
                                                   v1::HotRowsStatus*) {
  return Unimplemented(context, Rpc::kGetHotRows);
}

grpc::ServerUnaryReactor* AdminService::RebuildHotRows(grpc::CallbackServerContext* context,
                                                       const v1::RebuildHotRowsRequest*,
                                                       v1::HotRowsStatus*) {
  return Unimplemented(context, Rpc::kRebuildHotRows);
}

}  // namespace fuserank::server
