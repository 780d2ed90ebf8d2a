// The Admin service's bearer-token check (SPEC section 1, issue 5): with
// server.admin_token_file set, every admin call must carry the metadata
// `authorization: Bearer <token>`; anything else is UNAUTHENTICATED. The token is read
// once at start and compared in constant time. Immutable after creation; thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_AUTH_H_
#define FUSERANK_SERVER_ADMIN_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fuserank::server {

class AdminAuth {
 public:
  // No token: every call is allowed (admin_listen is then loopback, config validation
  // makes sure of it).
  AdminAuth() = default;

  // Reads the token from `token_file` ("" = no token). The trailing newline (\n or \r\n)
  // is stripped; an empty token, or one with characters that cannot travel in a header
  // (anything but printable ASCII without spaces), is FAILED_PRECONDITION naming
  // server.admin_token_file.
  static absl::StatusOr<AdminAuth> FromTokenFile(const std::string& token_file);
  // The same with the token itself (tests).
  static absl::StatusOr<AdminAuth> FromToken(absl::string_view token);

  bool required() const { return !token_.empty(); }

  // OK, or UNAUTHENTICATED saying what is missing or wrong (never the token).
  absl::Status Check(const grpc::CallbackServerContext& context) const;
  absl::Status CheckMetadata(
      const std::multimap<grpc::string_ref, grpc::string_ref>& client_metadata) const;

 private:
  explicit AdminAuth(std::string token) : token_(std::move(token)) {}

  std::string token_;
};

// True when a == b, in time that depends on the lengths only, not on where they differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_AUTH_H_
