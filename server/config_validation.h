// Value and cross-key checks of a parsed Config, and the error list both the parser and
// the checks write to ("<file>: <key>: <reason>", every problem, not just the first).
// Plain functions and a single-threaded collector.
#ifndef FUSERANK_SERVER_CONFIG_VALIDATION_H_
#define FUSERANK_SERVER_CONFIG_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/config.h"

namespace fuserank::server {

class ConfigErrors {
 public:
  explicit ConfigErrors(std::string file) : file_(std::move(file)) {}

  // `key` is the dotted path ("engine.streams"); `reason` says what is wrong and what
  // was found ("must be in 1..64, got 0").
  void Add(absl::string_view key, absl::string_view reason);
  bool empty() const { return lines_.empty(); }
  const std::vector<std::string>& lines() const { return lines_; }
  // OK when empty, else INVALID_ARGUMENT with one line per problem.
  absl::Status ToStatus() const;

 private:
  std::string file_;
  std::vector<std::string> lines_;
};

struct HostPort {
  std::string host;  // as written; IPv6 literals keep their brackets ("[::1]")
  int port = 0;      // 0: any free port
};

// Parses "host:port" (host: IPv4 literal, [IPv6] literal or DNS name; port 0..65535).
// The error message is a reason to append after the key.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);
bool IsLoopbackHost(absl::string_view host);

// Checks value ranges, addresses, files and keys that depend on each other.
void ValidateConfig(const Config& config, ConfigErrors* errors);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_CONFIG_VALIDATION_H_
