// Value and cross-key checks of a parsed Config: each key's own range or choices (from the
// key table, server/config_keys.h) and the rules between keys, all written to the error
// list the parser wrote to ("<file>: <key>: <reason>", every problem, not just the first).
// Plain functions.
#ifndef FUSERANK_SERVER_CONFIG_VALIDATION_H_
#define FUSERANK_SERVER_CONFIG_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/error_list.h"
#include "server/config.h"

namespace fuserank::server {

struct HostPort {
  std::string host;  // as written; IPv6 literals keep their brackets ("[::1]")
  int port = 0;      // 0: any free port
};

// Parses "host:port" (host: IPv4 literal, [IPv6] literal or DNS name; port 0..65535).
// The error message is a reason to append after the key.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);
bool IsLoopbackHost(absl::string_view host);

// What the start warns of a token on a non-loopback server.admin_listen without server.tls
// (allowed while server.admin_allow_plaintext_token is true, the default); "" otherwise.
std::string PlaintextAdminTokenWarning(const ServerConfig& server);

// Keys given that have no effect in this config, each "<file>: <key>: has no effect: ...":
// a CUDA-only key (ConfigKey::cuda_only) under engine.device: cpu, a token file with the
// Admin service off. The start logs them as warnings and --check-config prints them.
std::vector<std::string> ConfigWarnings(const Config& config);

// Checks value ranges, addresses, files and keys that depend on each other.
void ValidateConfig(const Config& config, engine::ErrorList* errors);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_CONFIG_VALIDATION_H_
