#include "server/config_validation.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/escape_text.h"
#include "engine/hot_rows/frequency_sketch.h"
#include "engine/regular_file.h"
#include "server/config_keys.h"

namespace fuserank::server {

using engine::ErrorList;

namespace {

// `host` as a literal IP: an IPv4 address (AF_INET, in *v4) or a bracketed IPv6 one
// (AF_INET6, in *v6); 0 for anything else, names included.
int IpLiteral(absl::string_view host, in_addr* v4, in6_addr* v6) {
  if (inet_pton(AF_INET, std::string(host).c_str(), v4) == 1) return AF_INET;
  if (host.size() < 2 || host.front() != '[' || host.back() != ']') return 0;
  return inet_pton(AF_INET6, std::string(host.substr(1, host.size() - 2)).c_str(), v6) == 1
             ? AF_INET6
             : 0;
}

// 0.0.0.0 or [::] (or another spelling of either): listens on every address of the host.
bool IsWildcardHost(absl::string_view host) {
  in_addr v4;
  in6_addr v6;
  switch (IpLiteral(host, &v4, &v6)) {
    case AF_INET:
      return v4.s_addr == 0;
    case AF_INET6:
      return IN6_IS_ADDR_UNSPECIFIED(&v6);
    default:
      return false;
  }
}

bool IsDnsName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (char c : host) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '.' && c != '_') return false;
  }
  return host.front() != '-' && host.front() != '.';
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("must be host:port (e.g. 0.0.0.0:8700 or [::]:8700), got '",
                     engine::EscapeText(address), "': ", why));
  };
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  HostPort result;
  absl::string_view host = address.substr(0, colon);
  absl::string_view port = address.substr(colon + 1);
  if (!absl::SimpleAtoi(port, &result.port) || port.empty() || !absl::ascii_isdigit(port[0]) ||
      result.port < 0 || result.port > 65535) {
    return bad("the port must be a number in 0..65535");
  }
  if (absl::StartsWith(host, "[")) {
    if (!absl::EndsWith(host, "]")) return bad("unclosed '['");
    std::string inner(host.substr(1, host.size() - 2));
    in6_addr addr6;
    if (inet_pton(AF_INET6, inner.c_str(), &addr6) != 1) return bad("not an IPv6 address");
  } else if (host.find(':') != absl::string_view::npos) {
    return bad("write IPv6 addresses in brackets");
  } else if (!IsDnsName(host)) {
    return bad("not an IPv4 address or host name");
  } else if (absl::ascii_isdigit(host.back())) {
    in_addr addr4;
    if (inet_pton(AF_INET, std::string(host).c_str(), &addr4) != 1) {
      return bad("not an IPv4 address");
    }
  }
  result.host = std::string(host);
  return result;
}

bool IsLoopbackHost(absl::string_view host) {
  // A literal address only: a name ("localhost", "127.attacker.example") resolves to
  // whatever DNS or /etc/hosts says.
  in_addr v4;
  in6_addr v6;
  switch (IpLiteral(host, &v4, &v6)) {
    case AF_INET:
      return (ntohl(v4.s_addr) >> 24) == 127;
    case AF_INET6:  // [::1], or [::ffff:127.x.y.z]
      return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
    default:
      return false;
  }
}

namespace {

// A regular file that can be opened; never blocks (a FIFO is refused, not waited on).
void CheckReadable(absl::string_view key, const std::string& path, ErrorList* errors) {
  if (path.empty()) return;
  absl::StatusOr<engine::RegularFile> file = engine::RegularFile::Open(path, "file");
  if (file.ok()) return;
  const absl::string_view message = file.status().message();
  const size_t colon = message.rfind(": ");
  errors->Add(key,
              absl::IsFailedPrecondition(file.status())
                  ? std::string(message)
                  : absl::StrCat("cannot read '", path, "'",
                                 colon == absl::string_view::npos ? "" : message.substr(colon)));
}

// An admin address that is not a literal loopback IP needs a token (SPEC section 5); with
// server.admin_allow_plaintext_token: false, also TLS, so that the token never travels in
// clear text (the start warns of it otherwise: PlaintextAdminTokenWarning).
void CheckPublicAdmin(const ServerConfig& server, const std::string& address, ErrorList* errors) {
  if (server.admin_token_file.empty()) {
    errors->Add("server.admin_listen",
                absl::StrCat("'", address,
                             "' is not a loopback address, so server.admin_token_file must be "
                             "set"));
  } else if (!server.tls.enabled() && !server.admin_allow_plaintext_token) {
    errors->Add("server.admin_listen",
                absl::StrCat("'", address,
                             "' is not a loopback address and server.tls is off, so the admin "
                             "token would travel in clear text: set server.tls (or "
                             "server.admin_allow_plaintext_token: true on a network you trust)"));
  }
}

// Checks each address and that no two share a fixed port (port 0 never conflicts).
void CheckAddresses(const ServerConfig& server, ErrorList* errors) {
  struct Entry {
    const char* key;
    const std::string* value;
    bool optional;
  };
  const Entry entries[] = {{"server.listen", &server.listen, false},
                           {"server.admin_listen", &server.admin_listen, true},
                           {"server.metrics_listen", &server.metrics_listen, true}};
  std::vector<std::pair<const char*, HostPort>> parsed;
  for (const Entry& entry : entries) {
    if (entry.value->empty()) {
      if (!entry.optional) errors->Add(entry.key, "must not be empty");
      continue;
    }
    absl::StatusOr<HostPort> hp = ParseHostPort(*entry.value);
    if (!hp.ok()) {
      errors->Add(entry.key, hp.status().message());
      continue;
    }
    for (const auto& [other_key, other] : parsed) {
      if (hp->port == 0 || hp->port != other.port) continue;
      if (hp->host == other.host) {
        errors->Add(entry.key, absl::StrCat("'", *entry.value, "' is also ", other_key));
      } else if (IsWildcardHost(hp->host) || IsWildcardHost(other.host)) {
        errors->Add(entry.key,
                    absl::StrCat("'", *entry.value, "' shares port ", hp->port, " with ", other_key,
                                 " '", other.host, ":", other.port,
                                 "', and a wildcard address (0.0.0.0, [::]) listens on every "
                                 "address: the second bind would fail; use another port"));
      }
    }
    if (entry.key == absl::string_view("server.admin_listen") && !IsLoopbackHost(hp->host)) {
      CheckPublicAdmin(server, *entry.value, errors);
    }
    parsed.emplace_back(entry.key, *hp);
  }
}

void CheckServer(const ServerConfig& server, ErrorList* errors) {
  CheckAddresses(server, errors);
  CheckReadable("server.admin_token_file", server.admin_token_file, errors);
  const TlsConfig& tls = server.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    errors->Add(tls.cert_file.empty() ? "server.tls.cert_file" : "server.tls.key_file",
                "server.tls.cert_file and server.tls.key_file must be set together");
  }
  if (!tls.client_ca_file.empty() && tls.cert_file.empty()) {
    errors->Add("server.tls.client_ca_file", "requires server.tls.cert_file and key_file");
  }
  CheckReadable("server.tls.cert_file", tls.cert_file, errors);
  CheckReadable("server.tls.key_file", tls.key_file, errors);
  CheckReadable("server.tls.client_ca_file", tls.client_ca_file, errors);
}

void CheckEngine(const Config& config, ErrorList* errors) {
  const EngineConfig& engine = config.engine;
  if (engine.max_queued_ids < engine.max_batch_ids && engine.max_queued_ids >= 1) {
    errors->Add("engine.max_queued_ids",
                absl::StrCat("must be at least engine.max_batch_ids (", engine.max_batch_ids,
                             ") so that one request can queue, got ", engine.max_queued_ids));
  }
}

void CheckCache(const CacheConfig& cache, ErrorList* errors) {
  if (cache.policy == CachePolicy::kFrequency &&
      cache.hot_rows_per_table > engine::kMaxSketchedCapacity) {
    errors->Add("cache.hot_rows_per_table",
                absl::StrCat("must be at most ", engine::kMaxSketchedCapacity,
                             " with cache.policy: frequency (each table's frequency sketch is "
                             "sized from it), got ",
                             cache.hot_rows_per_table));
  }
}

// model.roots: existing directories.
void CheckModelRoots(const Config& config, ErrorList* errors) {
  for (size_t i = 0; i < config.model_roots.size(); ++i) {
    const std::string key = absl::StrCat("model.roots[", i, "]");
    const std::string& root = config.model_roots[i];
    struct stat st;
    if (root.empty()) {
      errors->Add(key, "must not be empty");
    } else if (::stat(root.c_str(), &st) != 0) {
      errors->Add(key, absl::StrCat("cannot use '", root, "': ", std::strerror(errno)));
    } else if (!S_ISDIR(st.st_mode)) {
      errors->Add(key, absl::StrCat("'", root, "' is not a directory"));
    }
  }
}

void CheckModels(const Config& config, ErrorList* errors) {
  const std::vector<ModelConfig>& models = config.models;
  if (models.empty()) errors->Add("models", "must list at least one model");
  CheckModelRoots(config, errors);
  int first_default = -1;
  for (size_t i = 0; i < models.size(); ++i) {
    if (models[i].is_default) {
      if (first_default >= 0) {
        errors->Add(absl::StrCat("models[", i, "].default"),
                    absl::StrCat("only one model can be the default; models[", first_default,
                                 "] already is"));
      } else {
        first_default = static_cast<int>(i);
      }
    }
    const std::string key = models.size() == 1 && models[i].name.empty()
                                ? "model.path"
                                : absl::StrCat("models[", i, "].path");
    if (models[i].path.empty()) errors->Add(key, "must not be empty");
    for (size_t j = 0; j < i; ++j) {
      if (!models[i].name.empty() && models[i].name == models[j].name) {
        errors->Add(absl::StrCat("models[", i, "].name"),
                    absl::StrCat("'", models[i].name, "' is also models[", j, "].name"));
      }
    }
  }
}

}  // namespace

std::string PlaintextAdminTokenWarning(const ServerConfig& server) {
  if (server.admin_listen.empty() || server.admin_token_file.empty() || server.tls.enabled()) {
    return "";
  }
  absl::StatusOr<HostPort> hp = ParseHostPort(server.admin_listen);
  if (!hp.ok() || IsLoopbackHost(hp->host)) return "";
  return absl::StrCat("server.admin_listen: '", server.admin_listen,
                      "' is not a loopback address and server.tls is off: the admin token "
                      "travels in clear text; set server.tls, or "
                      "server.admin_allow_plaintext_token: false to refuse such a start");
}

std::vector<std::string> ConfigWarnings(const Config& config) {
  std::vector<std::string> warnings;
  const std::string file = config.file.empty() ? "<config>" : config.file;
  if (config.engine.device == engine::DeviceChoice::kCpu) {
    for (const ConfigKey& key : ConfigKeys()) {
      if (!key.cuda_only || !config.Given(key.path)) continue;
      warnings.push_back(absl::StrCat(file, ": ", key.path,
                                      ": has no effect with engine.device: cpu (only the CUDA "
                                      "backend reads it)"));
    }
  }
  if (config.server.admin_listen.empty() && !config.server.admin_token_file.empty()) {
    warnings.push_back(absl::StrCat(
        file,
        ": server.admin_token_file: has no effect: server.admin_listen is empty, so the Admin "
        "service is off and no call is checked against the token"));
  }
  return warnings;
}

void ValidateConfig(const Config& config, ErrorList* errors) {
  for (const ConfigKey& key : ConfigKeys()) {
    if (key.check) key.check(config, errors);
  }
  CheckServer(config.server, errors);
  CheckEngine(config, errors);
  CheckCache(config.cache, errors);
  CheckModels(config, errors);
}

}  // namespace fuserank::server
