// The Admin service's bearer-token check (SPEC section 1): with
// server.admin_token_file set, every admin call must carry the metadata
// `authorization: Bearer <token>`; anything else is UNAUTHENTICATED. The token is read
// once at start (a regular file of at most kMaxTokenFileBytes that neither its group nor
// others may read) and compared in constant time. Refusals are logged through a rate
// limiter shared by every copy. Immutable after creation (but the limiter); thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_AUTH_H_
#define FUSERANK_SERVER_ADMIN_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/logging.h"

namespace fuserank::server {

inline constexpr size_t kMaxTokenFileBytes = 4096;

class AdminAuth {
 public:
  // No token: every call is allowed (admin_listen is then loopback, config validation
  // makes sure of it).
  AdminAuth() = default;

  // Reads the token from `token_file` ("" = no token). The trailing newline (\n or \r\n)
  // is stripped; an empty token, or one with characters that cannot travel in a header
  // (anything but printable ASCII without spaces), is FAILED_PRECONDITION naming
  // server.admin_token_file, and so is a file that is not a regular file or is larger than
  // kMaxTokenFileBytes. A file its group or others can read (mode & 044) is accepted with
  // a warning() for the start to log.
  static absl::StatusOr<AdminAuth> FromTokenFile(const std::string& token_file);
  // The same with the token itself (tests).
  static absl::StatusOr<AdminAuth> FromToken(absl::string_view token);

  bool required() const { return !token_.empty(); }
  // What the start should warn about the token file ("" when nothing).
  const std::string& warning() const { return warning_; }

  // OK, or UNAUTHENTICATED saying what is missing or wrong (never the token).
  absl::Status Check(const grpc::CallbackServerContext& context) const;
  absl::Status CheckMetadata(
      const std::multimap<grpc::string_ref, grpc::string_ref>& client_metadata) const;

  // Logs a refused call ("admin <method> from <peer> refused: <why>") at warn, at most
  // kRefusalLogBurst lines per kRefusalLogWindow; the next line let through says how many
  // were dropped. A client can make refusals as fast as it likes; the log stays readable.
  void LogRefusal(absl::string_view method, absl::string_view peer,
                  const absl::Status& status) const;
  static constexpr int kRefusalLogBurst = 20;
  static constexpr absl::Duration kRefusalLogWindow = absl::Seconds(60);

 private:
  explicit AdminAuth(std::string token) : token_(std::move(token)) {}

  std::string token_;
  std::string warning_;
  std::shared_ptr<LogRateLimiter> refusals_ =
      std::make_shared<LogRateLimiter>(kRefusalLogBurst, kRefusalLogWindow);
};

// True when a == b, in time that depends on the lengths only, not on where they differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_AUTH_H_
