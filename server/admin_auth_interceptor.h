// Puts everything the admin port serves besides fuserank.v1.Admin and grpc.health.v1.Health
// behind the admin token: server reflection above all (it lists and describes the admin
// API). Admin checks the token itself (admin_service.h: UNAUTHENTICATED with a message, and
// counted); health stays open for probes. gRPC's C++ server interceptors cannot answer a
// call themselves, so a call without the right token is cancelled before its handler reads
// a message: the client sees CANCELLED and gets nothing; the refusal is logged
// (AdminAuth::LogRefusal, rate-limited). Installed only when a token is configured.
// The factory is immutable once built; thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_AUTH_INTERCEPTOR_H_
#define FUSERANK_SERVER_ADMIN_AUTH_INTERCEPTOR_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include "server/admin_auth.h"

namespace fuserank::server {

class AdminAuthInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit AdminAuthInterceptorFactory(AdminAuth auth) : auth_(std::move(auth)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const AdminAuth auth_;
};

// True for the methods the interceptor leaves to their service (Admin, health).
bool ChecksItsOwnToken(absl::string_view method);

// Adds the interceptor to the admin server's `builder` when `auth` requires a token.
void RequireAdminTokenForAll(const AdminAuth& auth, grpc::ServerBuilder* builder);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_AUTH_INTERCEPTOR_H_
