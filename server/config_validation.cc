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
#include "engine/hot_rows/frequency_sketch.h"
#include "engine/regular_file.h"

namespace fuserank::server {

void ConfigErrors::Add(absl::string_view key, absl::string_view reason) {
  lines_.push_back(absl::StrCat(file_.empty() ? "<config>" : file_, ": ", key, ": ", reason));
}

absl::Status ConfigErrors::ToStatus() const {
  if (lines_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(lines_, "\n"));
}

namespace {

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
    return absl::InvalidArgumentError(absl::StrCat(
        "must be host:port (e.g. 0.0.0.0:8700 or [::]:8700), got '", address, "': ", why));
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
  in_addr addr4;
  if (inet_pton(AF_INET, std::string(host).c_str(), &addr4) == 1) {
    return (ntohl(addr4.s_addr) >> 24) == 127;
  }
  if (host.size() < 2 || host.front() != '[' || host.back() != ']') return false;
  in6_addr addr6;
  if (inet_pton(AF_INET6, std::string(host.substr(1, host.size() - 2)).c_str(), &addr6) != 1) {
    return false;
  }
  if (IN6_IS_ADDR_LOOPBACK(&addr6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&addr6) && addr6.s6_addr[12] == 127;  // [::ffff:127.x.y.z]
}

namespace {

template <typename T>
void CheckRange(absl::string_view key, T value, T lo, T hi, ConfigErrors* errors) {
  if (!(value >= lo && value <= hi)) {
    errors->Add(key, absl::StrCat("must be in ", lo, "..", hi, ", got ", value));
  }
}

// A regular file that can be opened; never blocks (a FIFO is refused, not waited on).
void CheckReadable(absl::string_view key, const std::string& path, ConfigErrors* errors) {
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

// An admin address that is not a literal loopback IP needs a token, and the token must not
// travel in clear text unless the operator says the network is trusted.
void CheckPublicAdmin(const ServerConfig& server, const std::string& address,
                      ConfigErrors* errors) {
  if (server.admin_token_file.empty()) {
    errors->Add("server.admin_listen",
                absl::StrCat("'", address,
                             "' is not a loopback address, so server.admin_token_file must be "
                             "set"));
  } else if (!server.tls.enabled() && !server.admin_allow_plaintext_token) {
    errors->Add("server.admin_listen",
                absl::StrCat("'", address,
                             "' is not a loopback address and server.tls is off, so the admin "
                             "token would travel in clear text: set server.tls, or "
                             "server.admin_allow_plaintext_token: true on a network you trust"));
  }
}

// Checks each address and that no two share a fixed port (port 0 never conflicts).
void CheckAddresses(const ServerConfig& server, ConfigErrors* errors) {
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
      if (hp->port != 0 && hp->port == other.port && hp->host == other.host) {
        errors->Add(entry.key, absl::StrCat("'", *entry.value, "' is also ", other_key));
      }
    }
    if (entry.key == absl::string_view("server.admin_listen") && !IsLoopbackHost(hp->host)) {
      CheckPublicAdmin(server, *entry.value, errors);
    }
    parsed.emplace_back(entry.key, *hp);
  }
}

void CheckServer(const ServerConfig& server, ConfigErrors* errors) {
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
  // gRPC takes the receive limit as an int; keep room for the transport's own slack.
  CheckRange<int64_t>("server.max_request_bytes", server.max_request_bytes, 1024, 1 << 30, errors);
  CheckRange("server.max_candidates", server.max_candidates, 1, 1 << 20, errors);
  CheckRange("server.max_ids_per_feature", server.max_ids_per_feature, 1, 1 << 20, errors);
  CheckRange("server.shutdown_grace_seconds", server.shutdown_grace_seconds, 0, 3600, errors);
  CheckRange("server.max_inflight_requests", server.max_inflight_requests, 0, 1 << 20, errors);
  CheckRange("server.max_concurrent_streams", server.max_concurrent_streams, 0, 1 << 20, errors);
  if (server.transport_memory_bytes != 0) {
    CheckRange<int64_t>("server.transport_memory_bytes", server.transport_memory_bytes, 1 << 20,
                        int64_t{1} << 40, errors);
  }
}

void CheckEngine(const Config& config, ConfigErrors* errors) {
  const EngineConfig& engine = config.engine;
  CheckRange("engine.gpu", engine.gpu, 0, 1023, errors);
  if (!engine.streams_auto) CheckRange("engine.streams", engine.streams, 1, 64, errors);
  CheckRange("engine.max_batch_candidates", engine.max_batch_candidates, 1, 1 << 22, errors);
  if (engine.max_batch_candidates < config.server.max_candidates &&
      engine.max_batch_candidates >= 1) {
    errors->Add(
        "engine.max_batch_candidates",
        absl::StrCat("must be at least server.max_candidates (", config.server.max_candidates,
                     ") so that one request fits, got ", engine.max_batch_candidates));
  }
  CheckRange("engine.max_batch_wait_us", engine.max_batch_wait_us, 0, 1000000, errors);
  CheckRange("engine.queue_capacity", engine.queue_capacity, 1, 1 << 20, errors);
  CheckRange("engine.max_queue_delay_ms", engine.max_queue_delay_ms, 0, 3600000, errors);
  // Merged offsets are 32-bit (engine/batch.h, the CUDA packer): stay far below.
  CheckRange("engine.max_batch_ids", engine.max_batch_ids, 1, 1 << 26, errors);
  CheckRange<int64_t>("engine.max_queued_ids", engine.max_queued_ids, 1, int64_t{1} << 32, errors);
  if (engine.max_queued_ids < engine.max_batch_ids && engine.max_queued_ids >= 1) {
    errors->Add("engine.max_queued_ids",
                absl::StrCat("must be at least engine.max_batch_ids (", engine.max_batch_ids,
                             ") so that one request can queue, got ", engine.max_queued_ids));
  }
  CheckRange("engine.cpu_threads", engine.cpu_threads, 1, 1024, errors);
}

void CheckCache(const CacheConfig& cache, ConfigErrors* errors) {
  CheckRange("cache.hot_rows_per_table", cache.hot_rows_per_table, 0, 1 << 29, errors);
  if (cache.policy == CachePolicy::kFrequency &&
      cache.hot_rows_per_table > engine::kMaxSketchedCapacity) {
    errors->Add("cache.hot_rows_per_table",
                absl::StrCat("must be at most ", engine::kMaxSketchedCapacity,
                             " with cache.policy: frequency (each table's frequency sketch is "
                             "sized from it), got ",
                             cache.hot_rows_per_table));
  }
  CheckRange("cache.rebuild_interval_seconds", cache.rebuild_interval_seconds, 1, 86400, errors);
  // Reserved for the CUDA backend's hot-row tier, which does not exist yet: a value other
  // than the default would be accepted and ignored, so it is refused.
  if (cache.placement != CachePlacement::kDevice) {
    errors->Add("cache.placement",
                "only 'device' is implemented (every table stays wholly in the serving "
                "device's memory); 'host' is not implemented yet");
  }
  if (cache.shared_memory_rows != 0) {
    errors->Add("cache.shared_memory_rows",
                absl::StrCat("only 0 is implemented (no hot rows are staged in GPU shared "
                             "memory yet), got ",
                             cache.shared_memory_rows));
  }
}

// model.roots: existing directories; model.memory_budget_bytes: 0 (auto) or at least 1 MiB.
void CheckModelMemory(const Config& config, ConfigErrors* errors) {
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
  const int64_t budget = config.model_memory_budget_bytes;
  if (budget != 0 && (budget < (int64_t{1} << 20) || budget < 0)) {
    errors->Add("model.memory_budget_bytes",
                absl::StrCat("must be 0 (three quarters of the memory available) or at least "
                             "1048576, got ",
                             budget));
  }
}

void CheckModels(const Config& config, ConfigErrors* errors) {
  const std::vector<ModelConfig>& models = config.models;
  if (models.empty()) errors->Add("models", "must list at least one model");
  CheckRange("model.watch_interval_seconds", config.model_watch_interval_seconds, 0, 86400, errors);
  CheckModelMemory(config, errors);
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

void CheckLogging(const LoggingConfig& logging, ConfigErrors* errors) {
  static constexpr absl::string_view kLevels[] = {"trace", "debug",    "info", "warn",
                                                  "error", "critical", "off"};
  bool known = false;
  for (absl::string_view level : kLevels) known |= logging.level == level;
  if (!known) {
    errors->Add("logging.level", absl::StrCat("must be one of ", absl::StrJoin(kLevels, "|"),
                                              ", got '", logging.level, "'"));
  }
  CheckRange("logging.access_log_sample", logging.access_log_sample, 0.0, 1.0, errors);
}

}  // namespace

void ValidateConfig(const Config& config, ConfigErrors* errors) {
  CheckServer(config.server, errors);
  CheckEngine(config, errors);
  CheckCache(config.cache, errors);
  CheckModels(config, errors);
  CheckLogging(config.logging, errors);
}

}  // namespace fuserank::server
