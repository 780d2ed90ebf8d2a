#include "server/admin_auth_interceptor.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"

namespace fuserank::server {
namespace {

class AdminAuthInterceptor final : public grpc::experimental::Interceptor {
 public:
  AdminAuthInterceptor(const AdminAuth* auth, grpc::experimental::ServerRpcInfo* info)
      : auth_(auth), info_(info) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      const absl::Status status = auth_->CheckMetadata(*methods->GetRecvInitialMetadata());
      if (!status.ok()) {
        auth_->LogRefusal(info_->method(), info_->server_context()->peer(), status);
        info_->server_context()->TryCancel();  // the handler's reads fail: nothing is answered
      }
    }
    methods->Proceed();
  }

 private:
  const AdminAuth* const auth_;  // the factory's, which outlives the server
  grpc::experimental::ServerRpcInfo* const info_;
};

}  // namespace

bool ChecksItsOwnToken(absl::string_view method) {
  return absl::StartsWith(method, "/fuserank.v1.Admin/") ||
         absl::StartsWith(method, "/grpc.health.v1.Health/");
}

grpc::experimental::Interceptor* AdminAuthInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (!auth_.required() || info->method() == nullptr || ChecksItsOwnToken(info->method())) {
    return nullptr;  // no interceptor for this call
  }
  return new AdminAuthInterceptor(&auth_, info);
}

void RequireAdminTokenForAll(const AdminAuth& auth, grpc::ServerBuilder* builder) {
  if (!auth.required()) return;
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<AdminAuthInterceptorFactory>(auth));
  builder->experimental().SetInterceptorCreators(std::move(creators));
}

}  // namespace fuserank::server
