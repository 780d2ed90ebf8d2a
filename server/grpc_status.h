// The one place where an absl::Status becomes a grpc::Status (codes map one to one; long
// messages are cut so a status never carries a whole request back). Stateless.
#ifndef FUSERANK_SERVER_GRPC_STATUS_H_
#define FUSERANK_SERVER_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fuserank::server {

// Longest message sent to a client, in bytes (longer ones end in "... (truncated)").
inline constexpr size_t kMaxStatusMessageBytes = 1024;

grpc::Status ToGrpcStatus(const absl::Status& status);

// "OK", "INVALID_ARGUMENT", ...: the gRPC status name (metrics label `code`).
absl::string_view GrpcCodeName(grpc::StatusCode code);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_GRPC_STATUS_H_
