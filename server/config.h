// The server's YAML config (SPEC section 5), parsed once into plain structs. Each key is
// declared once, in the table of server/config_keys.cc (path, member, range or choices,
// doc), which drives reading, validation, the effective-config dump and the reference file
// config/fuserank.yaml; every default is the member initialiser below, taken from
// engine/config_defaults.h. Nothing else in the server reads YAML.
// Plain data: copyable, no synchronisation needed.
#ifndef FUSERANK_SERVER_CONFIG_H_
#define FUSERANK_SERVER_CONFIG_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/backend_factory.h"
#include "engine/config_defaults.h"
#include "engine/remote_tier.h"

namespace fuserank::server {

struct TlsConfig {
  std::string cert_file;       // PEM; with key_file turns TLS on for server.listen
  std::string key_file;        // PEM
  std::string client_ca_file;  // PEM; set: clients must present a certificate (mTLS)

  bool enabled() const { return !cert_file.empty(); }
};

struct ServerConfig {
  std::string listen = defaults::kListen;             // Ranker, health, reflection
  std::string admin_listen = defaults::kAdminListen;  // Admin; "" turns the admin server off
  std::string admin_token_file;                       // required when admin_listen is not loopback
  // A token on a non-loopback admin_listen without server.tls travels in clear text: refused
  // at start unless this is true (a network the operator trusts).
  bool admin_allow_plaintext_token = defaults::kAdminAllowPlaintextToken;
  std::string metrics_listen = defaults::kMetricsListen;  // Prometheus /metrics; "" turns it off
  TlsConfig tls;
  int64_t max_request_bytes = defaults::kMaxRequestBytes;
  int max_candidates = defaults::kMaxCandidates;
  int max_ids_per_feature = defaults::kMaxIdsPerFeature;
  int shutdown_grace_seconds = defaults::kShutdownGraceSeconds;
  // Admission and the transport (docs/serving.md, "Admission"); 0: derived from the
  // engine keys when the server starts (server.cc: ServingLimits).
  // Rank calls accepted and not finished.
  int max_inflight_requests = defaults::kMaxInflightRequests;
  // HTTP/2 streams one connection may have open.
  int max_concurrent_streams = defaults::kMaxConcurrentStreams;
  // gRPC resource quota of the ranking port.
  int64_t transport_memory_bytes = defaults::kTransportMemoryBytes;
  // How long an answered call may wait for the client to take its answer before it is
  // cancelled, freeing its in-flight slot (server/reply_watch.h).
  int reply_timeout_seconds = defaults::kReplyTimeoutSeconds;
};

// engine.cuda_wait: how a CUDA worker waits for its batch.
enum class CudaWait { kBlock, kSpin };

// engine.on_device_failure: what a model does once its backend's device has failed
// (engine/device_fault.h): kFail: its requests get UNAVAILABLE and health turns
// NOT_SERVING; kCpu: it goes on serving on a CPU backend built from the same weights.
enum class OnDeviceFailure { kFail, kCpu };

struct EngineConfig {
  engine::DeviceChoice device = engine::DeviceChoice::kAuto;
  int gpu = defaults::kGpu;
  // Backend workers: concurrent batches. `streams: auto` (the default) sets
  // streams_auto, and the server picks 4 for engine.device cuda, else the cores this
  // process may run on divided by cpu_threads, at most 4 (server.cc: ServingLimits).
  int streams = defaults::kStreams;
  bool streams_auto = true;
  int max_batch_candidates = defaults::kMaxBatchCandidates;
  int max_batch_wait_us = defaults::kMaxBatchWaitUs;
  int queue_capacity = defaults::kQueueCapacity;
  // The queue's latency budget; 0: deadlines only.
  int max_queue_delay_ms = defaults::kMaxQueueDelayMs;
  int worker_nice = defaults::kWorkerNice;
  int max_batch_ids = defaults::kMaxBatchIds;  // ids (user + item) in one merged batch
  // Ids of the requests queued or being admitted.
  int64_t max_queued_ids = defaults::kMaxQueuedIds;
  bool cuda_graphs = defaults::kCudaGraphs;
  int cpu_threads = defaults::kCpuThreads;  // CPU backend: threads that split one batch
  bool allow_tf32 = defaults::kAllowTf32;
  CudaWait cuda_wait = defaults::kCudaBlockingWait ? CudaWait::kBlock : CudaWait::kSpin;
  OnDeviceFailure on_device_failure = OnDeviceFailure::kFail;
  // The CPU engine's MLP arithmetic (fp32, the reference, or the opt-in bf16).
  engine::CpuPrecision cpu_precision = engine::CpuPrecision::kFp32;
};

enum class CachePolicy { kStatic, kFrequency };
enum class CachePlacement { kDevice, kHost };

struct CacheConfig {
  int hot_rows_per_table = defaults::kHotRowsPerTable;
  CachePolicy policy = CachePolicy::kStatic;
  int rebuild_interval_seconds = defaults::kRebuildIntervalSeconds;  // frequency policy
  CachePlacement placement = CachePlacement::kDevice;
  int shared_memory_rows = defaults::kSharedMemoryRows;
};

// One model to serve. `name` empty: the model spec's own name.
struct ModelConfig {
  std::string name;
  std::string path;         // model spec YAML; relative paths are relative to the working directory
  bool is_default = false;  // models[i].default; none marked: the first model is the default
};

enum class LogFormat { kText, kJson };

struct LoggingConfig {
  std::string level = defaults::kLogLevel;  // trace | debug | info | warn | error | critical | off
  LogFormat format = LogFormat::kText;
  double access_log_sample = defaults::kAccessLogSample;  // fraction of requests logged, 0..1
};

struct Config {
  std::string file;  // where it was read from ("" for defaults / text)
  ServerConfig server;
  EngineConfig engine;
  CacheConfig cache;
  // remote.*: the Redis Cluster of storage: redis tables (engine/remote_tier.h).
  engine::RemoteTierOptions remote;
  // The models to serve, never empty after parsing: `models:` when the file has that list,
  // else the one model of `model.path`. The default model is the one marked `default`,
  // else the first.
  std::vector<ModelConfig> models{ModelConfig{"", defaults::kModelPath}};
  // model.watch_interval_seconds: how often the model files are checked for a new version
  // (reloaded once unchanged for one more interval); 0 turns the watch off.
  int model_watch_interval_seconds = defaults::kModelWatchIntervalSeconds;
  // model.roots: the directories model specs and weights may be loaded from by a reload
  // (Admin ReloadModel and the file watch), compared after resolving symlinks; empty: the
  // directories of the configured models' spec and weights files.
  std::vector<std::string> model_roots;
  // model.memory_budget_bytes: the most host memory all served model versions together may
  // take (weights, dense layers, CPU plan, scratch: engine/model_memory.h), checked before a
  // version is loaded; 0: three quarters of the memory available to the process.
  int64_t model_memory_budget_bytes = defaults::kModelMemoryBudgetBytes;
  LoggingConfig logging;
  // The dotted paths of the keys the YAML gave ("engine.gpu"), for the rules on keys that
  // would have no effect (the value alone cannot tell a default from a key given).
  std::vector<std::string> given_keys;

  bool Given(absl::string_view path) const {
    return std::find(given_keys.begin(), given_keys.end(), path) != given_keys.end();
  }
};

// The largest config file read (the reference file is about 10 KiB).
inline constexpr uint64_t kMaxConfigBytes = uint64_t{1} << 20;

// Reads and validates `path`, a regular file of at most kMaxConfigBytes (else the error of
// engine::ReadRegularFile: NOT_FOUND, PERMISSION_DENIED or FAILED_PRECONDITION naming the
// path and what it is). A bad config: INVALID_ARGUMENT listing every problem, one per
// line, as "<file>: <key>: <reason>".
absl::StatusOr<Config> LoadConfigFile(const std::string& path);
// The same for YAML text; `file` names it in messages.
absl::StatusOr<Config> ParseConfig(absl::string_view yaml_text, absl::string_view file);

// The config with every default filled in, as YAML that ParseConfig reads back to the same
// config (logged at start).
std::string EffectiveConfigYaml(const Config& config);
// The reference config/fuserank.yaml: every key with its default, range or choices and doc
// (`fuserank-server --print-reference-config`; a test keeps the checked-in file current).
std::string ReferenceConfigYaml();

absl::string_view DeviceChoiceName(engine::DeviceChoice device);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_CONFIG_H_
