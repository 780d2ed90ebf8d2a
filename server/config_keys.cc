// The table of server config keys. Each entry is one key; the factories of
// server/config_key_factories.h turn its type, member and range into the reader, the dump
// text and the check.
#include "server/config_keys.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/sgemm_bf16.h"
#include "engine/escape_text.h"
#include "engine/hot_rows/frequency_sketch.h"
#include "server/config_key_factories.h"
#include "server/config_validation.h"

namespace fuserank::server {
namespace {

using config_key_factories::ChoiceNames;
using config_key_factories::Choices;
using config_key_factories::EmitString;
using config_key_factories::Enum;
using config_key_factories::Plain;
using config_key_factories::Ranged;
using config_key_factories::StringChoice;
using config_key_factories::Text;
using engine::ErrorList;
using engine::EscapeText;
using engine::YamlMap;

// A key only the CUDA backend reads: given with engine.device: cpu it does nothing, and the
// start says so (ConfigWarnings). Not refused: SPEC section 5's own example sets gpu and
// cuda_graphs, and a config switched to the CPU must still start.
ConfigKey CudaOnly(ConfigKey key) {
  key.cuda_only = true;
  return key;
}

// engine.streams: an integer in 1..64 or `auto`.
ConfigKey Streams() {
  ConfigKey key;
  key.path = "engine.streams";
  key.constraint = "auto or 1..64";
  key.doc =
      "backend workers: batches scored at the same time; auto: 4 with device cuda, else the "
      "cores this process may run on / cpu_threads (1..4)";
  key.read = [](YamlMap& map, absl::string_view name, Config* config) {
    map.IntOrAuto(name, &config->engine.streams, &config->engine.streams_auto);
  };
  key.value = [](const Config& config) {
    return config.engine.streams_auto ? std::string("auto") : Text(config.engine.streams);
  };
  key.check = [](const Config& config, ErrorList* errors) {
    const int streams = config.engine.streams;
    if (!config.engine.streams_auto && (streams < 1 || streams > 64)) {
      errors->Add("engine.streams", absl::StrCat("must be in 1..64, got ", streams));
    }
  };
  return key;
}

bool SingleModel(const Config& config) {
  return config.models.size() == 1 && config.models[0].name.empty() && !config.models[0].is_default;
}

// models: a list of {name, path, default}, instead of model.path.
void ReadModelList(YamlMap& root, Config* config) {
  std::optional<YAML::Node> node = root.Find("models");
  if (!node) return;
  ErrorList* errors = root.errors();
  if (std::optional<YAML::Node> model = root.Find("model")) {
    const YAML::Node section = *model;
    if (section.IsMap() && section["path"].IsDefined()) {
      errors->Add("models", "give either model.path or models, not both");
    }
  }
  if (!node->IsSequence()) {
    errors->Add("models", absl::StrCat("must be a list of {name, path, default}, got ",
                                       engine::DescribeYaml(*node)));
    return;
  }
  config->models.clear();
  for (size_t i = 0; i < node->size(); ++i) {
    const std::string key = absl::StrCat("models[", i, "]");
    const YAML::Node item = (*node)[i];
    if (!item.IsMap()) {
      errors->Add(key, absl::StrCat("must be a map {name, path, default}, got ",
                                    engine::DescribeYaml(item)));
      continue;
    }
    ModelConfig model;
    YamlMap m(item, key, errors);
    m.String("name", &model.name);
    m.String("path", &model.path);
    m.Bool("default", &model.is_default);
    m.ReportUnknown();
    config->models.push_back(std::move(model));
  }
}

ConfigKey Models() {
  ConfigKey key;
  key.path = "models";
  key.doc =
      "several models, instead of model.path: a list of {name, path, default}; the one marked "
      "default (else the first) serves requests that name no model";
  key.read = [](YamlMap& root, absl::string_view, Config* config) { ReadModelList(root, config); };
  key.value = [](const Config& config) {
    YAML::Emitter out;
    out << YAML::Flow << YAML::BeginSeq;
    for (const ModelConfig& model : config.models) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "name" << YAML::Value;
      EmitString(out, model.name);
      out << YAML::Key << "path" << YAML::Value;
      EmitString(out, model.path);
      out << YAML::Key << "default" << YAML::Value << model.is_default << YAML::EndMap;
    }
    out << YAML::EndSeq;
    return std::string(out.c_str());
  };
  key.present = [](const Config& config) { return !SingleModel(config); };
  return key;
}

std::vector<ConfigKey> BuildKeys() {
  using engine::DeviceChoice;
  constexpr int kMi = 1 << 20;
  std::vector<ConfigKey> keys;
  // server
  keys.push_back(Plain("server.listen", FUSERANK_MEMBER(server.listen),
                       "Ranker, KServe, grpc.health.v1.Health, server reflection"));
  keys.push_back(Plain("server.admin_listen", FUSERANK_MEMBER(server.admin_listen),
                       "Admin service; \"\" turns it off. A non-loopback address requires "
                       "admin_token_file"));
  keys.push_back(
      Plain("server.admin_token_file", FUSERANK_MEMBER(server.admin_token_file),
            "bearer token, sent as `authorization: Bearer <t>`; a regular file of "
            "<= 4096 bytes; mode 0600, or 0440 root-owned in the server's group (a Kubernetes "
            "Secret with fsGroup); else a warning at start"));
  keys.push_back(Plain("server.admin_allow_plaintext_token",
                       FUSERANK_MEMBER(server.admin_allow_plaintext_token),
                       "false: refuse to start with a token on a non-loopback admin_listen "
                       "without tls (true: start, warning that the token travels in clear "
                       "text)"));
  keys.push_back(Plain("server.metrics_listen", FUSERANK_MEMBER(server.metrics_listen),
                       "Prometheus text format at /metrics; \"\" turns it off"));
  keys.push_back(
      Plain("server.tls.cert_file", FUSERANK_MEMBER(server.tls.cert_file),
            "PEM; with key_file turns TLS on for server.listen and server.admin_listen"));
  keys.push_back(Plain("server.tls.key_file", FUSERANK_MEMBER(server.tls.key_file), "PEM"));
  keys.push_back(Plain("server.tls.client_ca_file", FUSERANK_MEMBER(server.tls.client_ca_file),
                       "PEM; set: clients must present a certificate (mTLS)"));
  // The services check it themselves (gRPC's own receive limit is off); any positive size
  // works, up to 1 GiB.
  keys.push_back(
      Ranged<int64_t>("server.max_request_bytes", FUSERANK_MEMBER(server.max_request_bytes), 1,
                      1 << 30, "larger requests: INVALID_ARGUMENT naming this key, at every size"));
  keys.push_back(Ranged("server.max_candidates", FUSERANK_MEMBER(server.max_candidates), 1, kMi,
                        "candidates per request (checked on the wire, before parsing)"));
  keys.push_back(Ranged("server.max_ids_per_feature", FUSERANK_MEMBER(server.max_ids_per_feature),
                        1, kMi, "ids in one feature's bag"));
  keys.push_back(Ranged("server.shutdown_grace_seconds",
                        FUSERANK_MEMBER(server.shutdown_grace_seconds), 0, 3600,
                        "on SIGTERM/SIGINT: time in-flight requests get to finish"));
  keys.push_back(Ranged(
      "server.max_inflight_requests", FUSERANK_MEMBER(server.max_inflight_requests), 0, kMi,
      "Rank and ModelInfer calls accepted and not finished, checked before the request is "
      "read; over it: RESOURCE_EXHAUSTED at once. 0: models x (2 x queue_capacity + streams x "
      "max_batch_candidates / max_candidates) + 4 x cores"));
  keys.push_back(Ranged("server.max_concurrent_streams",
                        FUSERANK_MEMBER(server.max_concurrent_streams), 0, kMi,
                        "HTTP/2 streams one connection may open; 0: 2 x the above"));
  keys.push_back(Ranged<int64_t>(
      "server.transport_memory_bytes", FUSERANK_MEMBER(server.transport_memory_bytes), 1 << 20,
      int64_t{1} << 40,
      "gRPC resource quota of the ranking port (received request bytes); 0: max(256 MiB, 32 x "
      "max_request_bytes)",
      /*zero_is_auto=*/true));
  keys.push_back(Ranged("server.reply_timeout_seconds",
                        FUSERANK_MEMBER(server.reply_timeout_seconds), 1, 3600,
                        "an answered Rank or ModelInfer call whose client has not taken the "
                        "answer by then is cancelled (its in-flight slot freed)"));
  // engine
  keys.push_back(Enum<DeviceChoice>(
      "engine.device", FUSERANK_MEMBER(engine.device),
      {{"auto", DeviceChoice::kAuto}, {"cpu", DeviceChoice::kCpu}, {"cuda", DeviceChoice::kCuda}},
      "cuda without a usable GPU: refuse to start"));
  keys.push_back(
      CudaOnly(Ranged("engine.gpu", FUSERANK_MEMBER(engine.gpu), 0, 1023, "CUDA device ordinal")));
  keys.push_back(Streams());
  keys.push_back(Ranged("engine.max_batch_candidates", FUSERANK_MEMBER(engine.max_batch_candidates),
                        1, 1 << 22,
                        "dynamic batching across requests; a larger request runs alone"));
  keys.push_back(Ranged("engine.max_batch_wait_us", FUSERANK_MEMBER(engine.max_batch_wait_us), 0,
                        1000000, "longest a request waits for others to batch with"));
  keys.push_back(Ranged("engine.queue_capacity", FUSERANK_MEMBER(engine.queue_capacity), 1, kMi,
                        "queued requests; when full: RESOURCE_EXHAUSTED at once"));
  keys.push_back(Ranged(
      "engine.max_queue_delay_ms", FUSERANK_MEMBER(engine.max_queue_delay_ms), 0, 3600000,
      "longest a request should wait in the queue: one predicted to wait longer is refused at "
      "once (RESOURCE_EXHAUSTED), one that has waited longer is shed uncomputed. 0: no budget "
      "but each call's deadline (docs/serving.md, Sizing)"));
  // Merged offsets are 32-bit (engine/batch.h, the CUDA packer): stay far below.
  keys.push_back(Ranged("engine.max_batch_ids", FUSERANK_MEMBER(engine.max_batch_ids), 1, 1 << 26,
                        "ids (user + item) in one merged batch; a request with more is refused "
                        "(INVALID_ARGUMENT)"));
  keys.push_back(Ranged<int64_t>("engine.max_queued_ids", FUSERANK_MEMBER(engine.max_queued_ids), 1,
                                 int64_t{1} << 32,
                                 "ids of the requests queued or being admitted; over it: "
                                 "RESOURCE_EXHAUSTED at once; >= max_batch_ids"));
  keys.push_back(CudaOnly(Plain("engine.cuda_graphs", FUSERANK_MEMBER(engine.cuda_graphs),
                                "capture and replay a CUDA graph per batch-size bucket")));
  keys.push_back(Ranged("engine.cpu_threads", FUSERANK_MEMBER(engine.cpu_threads), 1, 1024,
                        "CPU engine: threads that split one batch"));
  keys.push_back(Ranged("engine.worker_nice", FUSERANK_MEMBER(engine.worker_nice), 0, 19,
                        "nice steps the compute threads run below gRPC's, so that calls are read "
                        "and refused at once on a saturated CPU. 0: same priority"));
  keys.push_back(CudaOnly(Plain("engine.allow_tf32", FUSERANK_MEMBER(engine.allow_tf32),
                                "CUDA: TF32 tensor-core math in the MLP")));
  ConfigKey precision = Enum<engine::CpuPrecision>(
      "engine.cpu_precision", FUSERANK_MEMBER(engine.cpu_precision),
      {{"fp32", engine::CpuPrecision::kFp32}, {"bf16", engine::CpuPrecision::kBf16}},
      "CPU engine MLP: fp32 (the reference) or bf16 (AVX512_BF16 CPUs; docs/cpu-engine.md)");
  precision.check = [](const Config& config, ErrorList* errors) {
    if (config.engine.cpu_precision == engine::CpuPrecision::kFp32) return;
    if (config.engine.device == engine::DeviceChoice::kCuda) {
      errors->Add("engine.cpu_precision",
                  "bf16 applies to the CPU engine only; engine.device: cuda does not use it "
                  "(set engine.device: cpu or auto, or cpu_precision: fp32)");
      return;
    }
    if (absl::Status available = engine::Bf16KernelsAvailable(); !available.ok()) {
      errors->Add("engine.cpu_precision", absl::StrCat(available.message(), "; use fp32"));
    }
  };
  keys.push_back(std::move(precision));
  keys.push_back(CudaOnly(Enum<CudaWait>(
      "engine.cuda_wait", FUSERANK_MEMBER(engine.cuda_wait),
      {{"block", CudaWait::kBlock}, {"spin", CudaWait::kSpin}},
      "CUDA: a worker waits for its batch asleep (block) or spinning on a core (spin)")));
  keys.push_back(CudaOnly(Enum<OnDeviceFailure>(
      "engine.on_device_failure", FUSERANK_MEMBER(engine.on_device_failure),
      {{"fail", OnDeviceFailure::kFail}, {"cpu", OnDeviceFailure::kCpu}},
      "after a device fault: fail (UNAVAILABLE, health NOT_SERVING) or cpu (serve on the CPU "
      "engine)")));
  // cache
  keys.push_back(Ranged("cache.hot_rows_per_table", FUSERANK_MEMBER(cache.hot_rows_per_table), 0,
                        1 << 29,
                        absl::StrCat("capacity of each table's hot-row set (policy frequency: "
                                     "at most ",
                                     engine::kMaxSketchedCapacity, ")")));
  keys.push_back(Enum<CachePolicy>(
      "cache.policy", FUSERANK_MEMBER(cache.policy),
      {{"static", CachePolicy::kStatic}, {"frequency", CachePolicy::kFrequency}},
      "static: the hot sets the Admin service sets; frequency: rebuilt from observed accesses"));
  keys.push_back(Ranged("cache.rebuild_interval_seconds",
                        FUSERANK_MEMBER(cache.rebuild_interval_seconds), 1, 86400,
                        "frequency policy: how often the hot sets are rebuilt"));
  ConfigKey placement = Enum<CachePlacement>(
      "cache.placement", FUSERANK_MEMBER(cache.placement),
      {{"device", CachePlacement::kDevice}, {"host", CachePlacement::kHost}},
      "engine.device: cuda only; where the tables live: device (all in GPU memory) or host "
      "(page-locked host memory, the hot sets in a GPU cache; docs/gpu.md)");
  placement.check = [](const Config& config, ErrorList* errors) {
    if (config.cache.placement == CachePlacement::kDevice ||
        config.engine.device == engine::DeviceChoice::kCuda) {
      return;
    }
    errors->Add("cache.placement",
                absl::StrCat("host places the CUDA backend's tables in host memory behind a GPU "
                             "hot-row cache; it needs engine.device: cuda (got ",
                             DeviceChoiceName(config.engine.device),
                             "; the CPU engine's tables are in host memory anyway: use "
                             "placement: device)"));
  };
  keys.push_back(std::move(placement));
  ConfigKey shared_rows =
      Plain("cache.shared_memory_rows", FUSERANK_MEMBER(cache.shared_memory_rows),
            "only 0 for now (CUDA shared-memory staging: refused)");
  shared_rows.check = [](const Config& config, ErrorList* errors) {
    if (config.cache.shared_memory_rows == 0) return;
    errors->Add("cache.shared_memory_rows",
                absl::StrCat("only 0 is implemented (no hot rows are staged in GPU shared "
                             "memory yet), got ",
                             config.cache.shared_memory_rows));
  };
  keys.push_back(std::move(shared_rows));
  // remote: the Redis Cluster behind storage: redis tables (docs/remote-tables.md)
  ConfigKey seeds = Plain("remote.seed_nodes", FUSERANK_MEMBER(remote.seed_nodes),
                          "host:port of any nodes of the Redis Cluster that holds the "
                          "storage: redis tables (required when a model has one)");
  seeds.check = [](const Config& config, ErrorList* errors) {
    for (size_t i = 0; i < config.remote.seed_nodes.size(); ++i) {
      const std::string key = absl::StrCat("remote.seed_nodes[", i, "]");
      absl::StatusOr<HostPort> node = ParseHostPort(config.remote.seed_nodes[i]);
      if (!node.ok()) {
        errors->Add(key, node.status().message());
      } else if (node->port == 0) {
        errors->Add(key, absl::StrCat("'", EscapeText(config.remote.seed_nodes[i]),
                                      "': a cluster node needs a port in 1..65535"));
      }
    }
  };
  keys.push_back(std::move(seeds));
  keys.push_back(Ranged("remote.fetch_deadline_ms", FUSERANK_MEMBER(remote.fetch_deadline_ms), 1,
                        60000, "the longest one batch's remote fetch may take"));
  keys.push_back(Ranged("remote.pool_size", FUSERANK_MEMBER(remote.pool_size), 1, 1024,
                        "idle connections kept open per cluster node"));
  keys.push_back(Enum<engine::OnRemoteError>(
      "remote.on_remote_error", FUSERANK_MEMBER(remote.on_remote_error),
      {{"fail", engine::OnRemoteError::kFail}, {"zero", engine::OnRemoteError::kZero}},
      "fail: requests that needed rows the cluster did not give get UNAVAILABLE naming the "
      "table (and a cluster unreachable at start stops the server); zero: they are served "
      "with zero vectors, counted"));
  keys.push_back(Ranged("remote.near_cache_rows", FUSERANK_MEMBER(remote.near_cache_rows),
                        int64_t{0}, int64_t{1} << 31,
                        "rows (and absent keys) kept near per storage: redis table; 0: none"));
  keys.push_back(Ranged("remote.near_cache_ttl_ms", FUSERANK_MEMBER(remote.near_cache_ttl_ms), 1,
                        86400000,
                        "how long a fetched row is served from the near cache: a row written "
                        "to the cluster is served at most this long after"));
  ConfigKey prefix = Plain("remote.key_prefix", FUSERANK_MEMBER(remote.key_prefix),
                           "cluster keys are <key_prefix><table>:<id>");
  prefix.check = [](const Config& config, ErrorList* errors) {
    // Redis Cluster hashes only the text between a key's first '{' and the next '}' (a hash
    // tag): a prefix with one would put every key of a table, or of every table, on one slot.
    if (config.remote.key_prefix.find('{') != std::string::npos) {
      errors->Add("remote.key_prefix",
                  absl::StrCat("'", EscapeText(config.remote.key_prefix),
                               "' has a '{': Redis Cluster would hash only the text between "
                               "'{' and '}' (a hash tag) and put a whole table on one slot"));
    }
  };
  keys.push_back(std::move(prefix));
  // model
  ConfigKey path = Plain("model.path", FUSERANK_MEMBER(models[0].path),
                         "the model spec; relative paths are relative to the working directory");
  path.present = SingleModel;
  keys.push_back(std::move(path));
  keys.push_back(Ranged("model.watch_interval_seconds",
                        FUSERANK_MEMBER(model_watch_interval_seconds), 0, 86400,
                        "reload a model whose files changed; 0: no watch"));
  keys.push_back(Plain("model.roots", FUSERANK_MEMBER(model_roots),
                       "where reloads may load specs and weights from (realpath); []: the "
                       "directories of the configured models' files"));
  ConfigKey budget = Plain("model.memory_budget_bytes", FUSERANK_MEMBER(model_memory_budget_bytes),
                           "all loaded versions together (weights, layers, scratch, hot-row "
                           "cache); 0: three quarters of the memory available");
  budget.constraint = "0 or at least 1048576";
  budget.check = [](const Config& config, ErrorList* errors) {
    const int64_t bytes = config.model_memory_budget_bytes;
    if (bytes == 0 || bytes >= (int64_t{1} << 20)) return;
    errors->Add("model.memory_budget_bytes",
                absl::StrCat("must be 0 (three quarters of the memory available) or at least "
                             "1048576, got ",
                             bytes));
  };
  keys.push_back(std::move(budget));
  keys.push_back(Models());
  // logging
  keys.push_back(StringChoice("logging.level", FUSERANK_MEMBER(logging.level),
                              {"trace", "debug", "info", "warn", "error", "critical", "off"}, ""));
  keys.push_back(Enum<LogFormat>("logging.format", FUSERANK_MEMBER(logging.format),
                                 {{"text", LogFormat::kText}, {"json", LogFormat::kJson}}, ""));
  keys.push_back(Ranged("logging.access_log_sample", FUSERANK_MEMBER(logging.access_log_sample),
                        0.0, 1.0, "fraction of requests written to the access log"));
  return keys;
}

#undef FUSERANK_MEMBER

}  // namespace

const std::vector<ConfigKey>& ConfigKeys() {
  static const std::vector<ConfigKey>* const keys = new std::vector<ConfigKey>(BuildKeys());
  return *keys;
}

const std::vector<ConfigSection>& ConfigSections() {
  static const std::vector<ConfigSection>* const sections = new std::vector<ConfigSection>{
      {"server", ""},
      {"server.tls", "optional TLS / mTLS of server.listen and server.admin_listen"},
      {"engine", ""},
      {"cache", "hot-row sets (docs/hot-rows.md)"},
      {"model",
       "One model. Several models: replace model.path with\n"
       "  models:\n"
       "    - {name: demo, path: config/models/demo.yaml}   # default: the one with default: "
       "true,\n"
       "                                                    # else the first"},
      {"logging", ""},
  };
  return *sections;
}

}  // namespace fuserank::server
