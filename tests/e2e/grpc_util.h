// Clients for what has no generated C++ stub here: grpc.health.v1 Check and server
// reflection's list_services and file_containing_symbol (hand-encoded protobuf over a
// generic stub), and a plain
// HTTP GET for /metrics. Test helpers; each call is independent and thread-safe.
#ifndef FUSERANK_TESTS_E2E_GRPC_UTIL_H_
#define FUSERANK_TESTS_E2E_GRPC_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fuserank::testing {

// grpc.health.v1.Health/Check for `service` ("" = the whole server): the
// ServingStatus number (1 SERVING, 2 NOT_SERVING) or the call's error.
absl::StatusOr<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service);

// The service names listed by grpc.reflection.v1alpha.ServerReflection.
absl::StatusOr<std::vector<std::string>> ReflectionServices(
    const std::shared_ptr<grpc::Channel>& channel);

// Reflection's file_containing_symbol for `symbol` (a service or message's full name), as
// grpcurl asks before it can call a method it has no .proto for: the number of file
// descriptors returned (the file and those it imports), or NOT_FOUND with the server's
// message.
absl::StatusOr<int> ReflectionDescribe(const std::shared_ptr<grpc::Channel>& channel,
                                       const std::string& symbol);

// GET http://127.0.0.1:<port><path>: the response body, or an error.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_GRPC_UTIL_H_
