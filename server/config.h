// The server's YAML config (SPEC section 5), parsed once into plain structs. Every
// default lives in the member initialisers below; nothing else in the server reads YAML.
// Plain data: copyable, no synchronisation needed.
#ifndef FUSERANK_SERVER_CONFIG_H_
#define FUSERANK_SERVER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/backend_factory.h"

namespace fuserank::server {

struct TlsConfig {
  std::string cert_file;       // PEM; with key_file turns TLS on for server.listen
  std::string key_file;        // PEM
  std::string client_ca_file;  // PEM; set: clients must present a certificate (mTLS)

  bool enabled() const { return !cert_file.empty(); }
};

struct ServerConfig {
  std::string listen = "0.0.0.0:8700";          // Ranker, health, reflection
  std::string admin_listen = "127.0.0.1:8701";  // Admin; "" turns the admin server off
  std::string admin_token_file;                 // required when admin_listen is not loopback
  // A token on a non-loopback admin_listen without server.tls travels in clear text: refused
  // at start unless this is true (a network the operator trusts).
  bool admin_allow_plaintext_token = false;
  std::string metrics_listen = "0.0.0.0:8702";  // Prometheus /metrics; "" turns it off
  TlsConfig tls;
  int64_t max_request_bytes = 16777216;
  int max_candidates = 4096;
  int max_ids_per_feature = 1024;
  int shutdown_grace_seconds = 10;
  // Admission and the transport (docs/serving.md, "Admission"); 0: derived from the
  // engine keys when the server starts (server.cc: ServingLimits).
  int max_inflight_requests = 0;       // Rank calls accepted and not finished
  int max_concurrent_streams = 0;      // HTTP/2 streams one connection may have open
  int64_t transport_memory_bytes = 0;  // gRPC resource quota of the ranking port
};

struct EngineConfig {
  engine::DeviceChoice device = engine::DeviceChoice::kAuto;
  int gpu = 0;
  // Backend workers: concurrent batches. `streams: auto` (the default) sets
  // streams_auto, and the server picks 4 for engine.device cuda, else the cores this
  // process may run on divided by cpu_threads, at most 4 (server.cc: ServingLimits).
  int streams = 4;
  bool streams_auto = true;
  int max_batch_candidates = 8192;
  int max_batch_wait_us = 200;
  int queue_capacity = 1024;
  int max_queue_delay_ms = 0;         // the queue's latency budget; 0: deadlines only
  int max_batch_ids = 4194304;        // ids (user + item) in one merged batch
  int64_t max_queued_ids = 16777216;  // ids of the requests queued or being admitted
  bool cuda_graphs = true;
  int cpu_threads = 1;  // CPU backend: threads that split one batch
  bool allow_tf32 = false;
};

enum class CachePolicy { kStatic, kFrequency };
enum class CachePlacement { kDevice, kHost };

struct CacheConfig {
  int hot_rows_per_table = 4096;
  CachePolicy policy = CachePolicy::kStatic;
  int rebuild_interval_seconds = 60;  // frequency policy
  CachePlacement placement = CachePlacement::kDevice;
  int shared_memory_rows = 0;
};

// One model to serve. `name` empty: the model spec's own name.
struct ModelConfig {
  std::string name;
  std::string path;         // model spec YAML; relative paths are relative to the working directory
  bool is_default = false;  // models[i].default; none marked: the first model is the default
};

enum class LogFormat { kText, kJson };

struct LoggingConfig {
  std::string level = "info";  // trace | debug | info | warn | error | critical | off
  LogFormat format = LogFormat::kText;
  double access_log_sample = 0.0;  // fraction of requests logged, 0..1
};

struct Config {
  std::string file;  // where it was read from ("" for defaults / text)
  ServerConfig server;
  EngineConfig engine;
  CacheConfig cache;
  // The models to serve, never empty after parsing: `models:` when the file has that list,
  // else the one model of `model.path`. The default model is the one marked `default`,
  // else the first.
  std::vector<ModelConfig> models{ModelConfig{"", "config/models/demo.yaml"}};
  // model.watch_interval_seconds: how often the model files are checked for a new version
  // (reloaded once unchanged for one more interval); 0 turns the watch off.
  int model_watch_interval_seconds = 5;
  // model.roots: the directories model specs and weights may be loaded from by a reload
  // (Admin ReloadModel and the file watch), compared after resolving symlinks; empty: the
  // directories of the configured models' spec and weights files.
  std::vector<std::string> model_roots;
  // model.memory_budget_bytes: the most host memory all served model versions together may
  // take (weights, dense layers, CPU plan, scratch: engine/model_memory.h), checked before a
  // version is loaded; 0: three quarters of the memory available to the process.
  int64_t model_memory_budget_bytes = 0;
  LoggingConfig logging;
};

// Reads and validates `path`. On error: INVALID_ARGUMENT listing every problem, one per
// line, as "<file>: <key>: <reason>".
absl::StatusOr<Config> LoadConfigFile(const std::string& path);
// The same for YAML text; `file` names it in messages.
absl::StatusOr<Config> ParseConfig(absl::string_view yaml_text, absl::string_view file);

// The config with every default filled in, as YAML that ParseConfig reads back to the same
// config (logged at start).
std::string EffectiveConfigYaml(const Config& config);

absl::string_view DeviceChoiceName(engine::DeviceChoice device);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_CONFIG_H_
