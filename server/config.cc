// YAML -> Config. The only reader of the server's YAML: types and unknown keys are checked
// here, values and cross-key rules in config_validation.cc.
#include "server/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/config_validation.h"

namespace fuserank::server {
namespace {

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return node.Tag() == "!" ? absl::StrCat("the string '", node.Scalar(), "'")
                               : absl::StrCat("'", node.Scalar(), "'");
    default:
      return "nothing (null)";
  }
}

// Converts a plain (unquoted) scalar; quoted scalars are strings and never numbers.
template <typename T>
bool ConvertScalar(const YAML::Node& node, T* out) {
  if (!node.IsScalar() || node.Tag() == "!") return false;
  try {
    *out = node.as<T>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

// Reads one YAML map: each getter marks its key as known; ReportUnknown() lists the rest.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string prefix, ConfigErrors* errors)
      : prefix_(std::move(prefix)), errors_(errors) {
    if (!node.IsMap()) return;  // callers only pass maps or null
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
      bool duplicate = false;
      for (const auto& entry : entries_) duplicate |= entry.first == key;
      if (duplicate) {
        errors_->Add(Key(key), "given more than once");
        continue;
      }
      entries_.emplace_back(std::move(key), it->second);
      used_.push_back(false);
    }
  }

  std::string Key(absl::string_view key) const {
    return prefix_.empty() ? std::string(key) : absl::StrCat(prefix_, ".", key);
  }

  // The node under `key`, or nullopt when absent; marks `key` as known either way.
  std::optional<YAML::Node> Find(absl::string_view key) {
    known_.emplace_back(key);
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].first == key) {
        used_[i] = true;
        return entries_[i].second;
      }
    }
    return std::nullopt;
  }

  // A nested section: a map, or null for "all defaults".
  std::optional<YAML::Node> Section(absl::string_view key) {
    std::optional<YAML::Node> node = Find(key);
    if (!node || node->IsMap() || node->IsNull()) return node;
    errors_->Add(Key(key), absl::StrCat("must be a map, got ", Describe(*node)));
    return std::nullopt;
  }

  void Int(absl::string_view key, int* out) {
    int64_t wide = *out;
    if (!Int64(key, &wide)) return;
    if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
      errors_->Add(Key(key), absl::StrCat("is out of range, got ", wide));
      return;
    }
    *out = static_cast<int>(wide);
  }
  bool Int64(absl::string_view key, int64_t* out) { return Scalar(key, "an integer", out); }
  // An integer, or the plain scalar `auto` (sets *is_auto and leaves *out alone).
  void IntOrAuto(absl::string_view key, int* out, bool* is_auto) {
    std::optional<YAML::Node> node = Find(key);
    if (!node) return;
    if (node->IsScalar() && node->Tag() != "!" && node->Scalar() == "auto") {
      *is_auto = true;
      return;
    }
    int64_t wide = 0;
    if (!ConvertScalar(*node, &wide)) {
      errors_->Add(Key(key), absl::StrCat("must be an integer or auto, got ", Describe(*node)));
      return;
    }
    if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
      errors_->Add(Key(key), absl::StrCat("is out of range, got ", wide));
      return;
    }
    *out = static_cast<int>(wide);
    *is_auto = false;
  }
  void Double(absl::string_view key, double* out) { Scalar(key, "a number", out); }
  void Bool(absl::string_view key, bool* out) { Scalar(key, "true or false", out); }

  void StringList(absl::string_view key, std::vector<std::string>* out) {
    std::optional<YAML::Node> node = Find(key);
    if (!node || node->IsNull()) return;
    if (!node->IsSequence()) {
      errors_->Add(Key(key), absl::StrCat("must be a list of strings, got ", Describe(*node)));
      return;
    }
    out->clear();
    for (size_t i = 0; i < node->size(); ++i) {
      const YAML::Node item = (*node)[i];
      if (!item.IsScalar()) {
        errors_->Add(absl::StrCat(Key(key), "[", i, "]"),
                     absl::StrCat("must be a string, got ", Describe(item)));
        continue;
      }
      out->push_back(item.Scalar());
    }
  }

  void String(absl::string_view key, std::string* out) {
    std::optional<YAML::Node> node = Find(key);
    if (!node) return;
    if (!node->IsScalar()) {
      errors_->Add(Key(key), absl::StrCat("must be a string, got ", Describe(*node)));
      return;
    }
    *out = node->Scalar();
  }

  template <typename E>
  void Enum(absl::string_view key, std::initializer_list<std::pair<absl::string_view, E>> names,
            E* out) {
    std::optional<YAML::Node> node = Find(key);
    if (!node) return;
    if (node->IsScalar()) {
      for (const auto& [name, value] : names) {
        if (node->Scalar() == name) {
          *out = value;
          return;
        }
      }
    }
    std::vector<absl::string_view> options;
    for (const auto& entry : names) options.push_back(entry.first);
    errors_->Add(Key(key), absl::StrCat("must be one of ", absl::StrJoin(options, "|"), ", got ",
                                        Describe(*node)));
  }

  void ReportUnknown() {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (used_[i]) continue;
      errors_->Add(Key(entries_[i].first),
                   absl::StrCat("unknown key (known here: ", absl::StrJoin(known_, ", "), ")"));
    }
  }

 private:
  template <typename T>
  bool Scalar(absl::string_view key, absl::string_view what, T* out) {
    std::optional<YAML::Node> node = Find(key);
    if (!node) return false;
    if (ConvertScalar(*node, out)) return true;
    errors_->Add(Key(key), absl::StrCat("must be ", what, ", got ", Describe(*node)));
    return false;
  }

  std::string prefix_;
  ConfigErrors* errors_;
  std::vector<std::pair<std::string, YAML::Node>> entries_;
  std::vector<bool> used_;
  std::vector<std::string> known_;
};

void ReadServer(const YAML::Node& node, ConfigErrors* errors, ServerConfig* server) {
  MapReader r(node, "server", errors);
  r.String("listen", &server->listen);
  r.String("admin_listen", &server->admin_listen);
  r.String("admin_token_file", &server->admin_token_file);
  r.Bool("admin_allow_plaintext_token", &server->admin_allow_plaintext_token);
  r.String("metrics_listen", &server->metrics_listen);
  if (std::optional<YAML::Node> tls_node = r.Section("tls")) {
    MapReader tls(*tls_node, "server.tls", errors);
    tls.String("cert_file", &server->tls.cert_file);
    tls.String("key_file", &server->tls.key_file);
    tls.String("client_ca_file", &server->tls.client_ca_file);
    tls.ReportUnknown();
  }
  r.Int64("max_request_bytes", &server->max_request_bytes);
  r.Int("max_candidates", &server->max_candidates);
  r.Int("max_ids_per_feature", &server->max_ids_per_feature);
  r.Int("shutdown_grace_seconds", &server->shutdown_grace_seconds);
  r.Int("max_inflight_requests", &server->max_inflight_requests);
  r.Int("max_concurrent_streams", &server->max_concurrent_streams);
  r.Int64("transport_memory_bytes", &server->transport_memory_bytes);
  r.ReportUnknown();
}

void ReadEngine(const YAML::Node& node, ConfigErrors* errors, EngineConfig* engine) {
  using engine::DeviceChoice;
  MapReader r(node, "engine", errors);
  r.Enum(
      "device",
      {{"auto", DeviceChoice::kAuto}, {"cpu", DeviceChoice::kCpu}, {"cuda", DeviceChoice::kCuda}},
      &engine->device);
  r.Int("gpu", &engine->gpu);
  r.IntOrAuto("streams", &engine->streams, &engine->streams_auto);
  r.Int("max_batch_candidates", &engine->max_batch_candidates);
  r.Int("max_batch_wait_us", &engine->max_batch_wait_us);
  r.Int("queue_capacity", &engine->queue_capacity);
  r.Int("max_queue_delay_ms", &engine->max_queue_delay_ms);
  r.Int("max_batch_ids", &engine->max_batch_ids);
  r.Int64("max_queued_ids", &engine->max_queued_ids);
  r.Bool("cuda_graphs", &engine->cuda_graphs);
  r.Int("cpu_threads", &engine->cpu_threads);
  r.Bool("allow_tf32", &engine->allow_tf32);
  r.ReportUnknown();
}

void ReadCache(const YAML::Node& node, ConfigErrors* errors, CacheConfig* cache) {
  MapReader r(node, "cache", errors);
  r.Int("hot_rows_per_table", &cache->hot_rows_per_table);
  r.Enum("policy", {{"static", CachePolicy::kStatic}, {"frequency", CachePolicy::kFrequency}},
         &cache->policy);
  r.Int("rebuild_interval_seconds", &cache->rebuild_interval_seconds);
  r.Enum("placement", {{"device", CachePlacement::kDevice}, {"host", CachePlacement::kHost}},
         &cache->placement);
  r.Int("shared_memory_rows", &cache->shared_memory_rows);
  r.ReportUnknown();
}

void ReadLogging(const YAML::Node& node, ConfigErrors* errors, LoggingConfig* logging) {
  MapReader r(node, "logging", errors);
  r.String("level", &logging->level);
  r.Enum("format", {{"text", LogFormat::kText}, {"json", LogFormat::kJson}}, &logging->format);
  r.Double("access_log_sample", &logging->access_log_sample);
  r.ReportUnknown();
}

void ReadModelList(const YAML::Node& node, ConfigErrors* errors, std::vector<ModelConfig>* out) {
  if (!node.IsSequence()) {
    errors->Add("models",
                absl::StrCat("must be a list of {name, path, default}, got ", Describe(node)));
    return;
  }
  out->clear();
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string key = absl::StrCat("models[", i, "]");
    if (!node[i].IsMap()) {
      errors->Add(key,
                  absl::StrCat("must be a map {name, path, default}, got ", Describe(node[i])));
      continue;
    }
    ModelConfig model;
    MapReader r(node[i], key, errors);
    r.String("name", &model.name);
    r.String("path", &model.path);
    r.Bool("default", &model.is_default);
    r.ReportUnknown();
    out->push_back(std::move(model));
  }
}

void ReadTopLevel(const YAML::Node& root, ConfigErrors* errors, Config* config) {
  if (!root.IsMap() && !root.IsNull()) {
    errors->Add("(top level)", absl::StrCat("must be a map of sections, got ", Describe(root)));
    return;
  }
  MapReader r(root, "", errors);
  if (auto node = r.Section("server")) ReadServer(*node, errors, &config->server);
  if (auto node = r.Section("engine")) ReadEngine(*node, errors, &config->engine);
  if (auto node = r.Section("cache")) ReadCache(*node, errors, &config->cache);
  bool model_path = false;
  if (std::optional<YAML::Node> model = r.Section("model")) {
    const YAML::Node& section = *model;
    model_path = section.IsMap() && section["path"].IsDefined();
    MapReader m(section, "model", errors);
    m.String("path", &config->models[0].path);
    m.Int("watch_interval_seconds", &config->model_watch_interval_seconds);
    m.StringList("roots", &config->model_roots);
    m.Int64("memory_budget_bytes", &config->model_memory_budget_bytes);
    m.ReportUnknown();
  }
  if (std::optional<YAML::Node> models = r.Find("models")) {
    if (model_path) errors->Add("models", "give either model.path or models, not both");
    ReadModelList(*models, errors, &config->models);
  }
  if (auto node = r.Section("logging")) ReadLogging(*node, errors, &config->logging);
  r.ReportUnknown();
}

}  // namespace

absl::StatusOr<Config> ParseConfig(absl::string_view yaml_text, absl::string_view file) {
  Config config;
  config.file = std::string(file);
  ConfigErrors errors(config.file);
  // yaml-cpp reports errors by throwing; nothing of ours throws.
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    ReadTopLevel(root, &errors, &config);
  } catch (const YAML::Exception& e) {
    errors.Add(absl::StrCat("line ", e.mark.line + 1, ", column ", e.mark.column + 1),
               absl::StrCat("YAML syntax error: ", e.msg));
    return errors.ToStatus();
  } catch (const std::exception& e) {
    errors.Add("(file)", absl::StrCat("cannot parse: ", e.what()));
    return errors.ToStatus();
  }
  ValidateConfig(config, &errors);
  if (!errors.empty()) return errors.ToStatus();
  return config;
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot read the config: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path);
}

absl::string_view DeviceChoiceName(engine::DeviceChoice device) {
  switch (device) {
    case engine::DeviceChoice::kCpu:
      return "cpu";
    case engine::DeviceChoice::kCuda:
      return "cuda";
    default:
      return "auto";
  }
}

namespace {

// Shortest text that reads back as the same double.
std::string DoubleText(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, end);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

std::string EffectiveConfigYaml(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "server" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "listen" << YAML::Value << c.server.listen;
  out << YAML::Key << "admin_listen" << YAML::Value << c.server.admin_listen;
  out << YAML::Key << "admin_token_file" << YAML::Value << c.server.admin_token_file;
  out << YAML::Key << "admin_allow_plaintext_token" << YAML::Value
      << c.server.admin_allow_plaintext_token;
  out << YAML::Key << "metrics_listen" << YAML::Value << c.server.metrics_listen;
  out << YAML::Key << "tls" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "cert_file" << YAML::Value << c.server.tls.cert_file;
  out << YAML::Key << "key_file" << YAML::Value << c.server.tls.key_file;
  out << YAML::Key << "client_ca_file" << YAML::Value << c.server.tls.client_ca_file;
  out << YAML::EndMap;
  out << YAML::Key << "max_request_bytes" << YAML::Value << c.server.max_request_bytes;
  out << YAML::Key << "max_candidates" << YAML::Value << c.server.max_candidates;
  out << YAML::Key << "max_ids_per_feature" << YAML::Value << c.server.max_ids_per_feature;
  out << YAML::Key << "shutdown_grace_seconds" << YAML::Value << c.server.shutdown_grace_seconds;
  out << YAML::Key << "max_inflight_requests" << YAML::Value << c.server.max_inflight_requests;
  out << YAML::Key << "max_concurrent_streams" << YAML::Value << c.server.max_concurrent_streams;
  out << YAML::Key << "transport_memory_bytes" << YAML::Value << c.server.transport_memory_bytes;
  out << YAML::EndMap;

  const EngineConfig& e = c.engine;
  out << YAML::Key << "engine" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "device" << YAML::Value << std::string(DeviceChoiceName(e.device));
  out << YAML::Key << "gpu" << YAML::Value << e.gpu;
  out << YAML::Key << "streams" << YAML::Value;
  if (e.streams_auto) {
    out << "auto";
  } else {
    out << e.streams;
  }
  out << YAML::Key << "max_batch_candidates" << YAML::Value << e.max_batch_candidates;
  out << YAML::Key << "max_batch_wait_us" << YAML::Value << e.max_batch_wait_us;
  out << YAML::Key << "queue_capacity" << YAML::Value << e.queue_capacity;
  out << YAML::Key << "max_queue_delay_ms" << YAML::Value << e.max_queue_delay_ms;
  out << YAML::Key << "max_batch_ids" << YAML::Value << e.max_batch_ids;
  out << YAML::Key << "max_queued_ids" << YAML::Value << e.max_queued_ids;
  out << YAML::Key << "cuda_graphs" << YAML::Value << e.cuda_graphs;
  out << YAML::Key << "cpu_threads" << YAML::Value << e.cpu_threads;
  out << YAML::Key << "allow_tf32" << YAML::Value << e.allow_tf32;
  out << YAML::EndMap;

  out << YAML::Key << "cache" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "hot_rows_per_table" << YAML::Value << c.cache.hot_rows_per_table;
  out << YAML::Key << "policy" << YAML::Value
      << (c.cache.policy == CachePolicy::kStatic ? "static" : "frequency");
  out << YAML::Key << "rebuild_interval_seconds" << YAML::Value << c.cache.rebuild_interval_seconds;
  out << YAML::Key << "placement" << YAML::Value
      << (c.cache.placement == CachePlacement::kDevice ? "device" : "host");
  out << YAML::Key << "shared_memory_rows" << YAML::Value << c.cache.shared_memory_rows;
  out << YAML::EndMap;

  const bool single = c.models.size() == 1 && c.models[0].name.empty() && !c.models[0].is_default;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  if (single) out << YAML::Key << "path" << YAML::Value << c.models[0].path;
  out << YAML::Key << "watch_interval_seconds" << YAML::Value << c.model_watch_interval_seconds;
  out << YAML::Key << "roots" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& root : c.model_roots) out << root;
  out << YAML::EndSeq;
  out << YAML::Key << "memory_budget_bytes" << YAML::Value << c.model_memory_budget_bytes;
  out << YAML::EndMap;
  if (!single) {
    out << YAML::Key << "models" << YAML::Value << YAML::BeginSeq;
    for (const ModelConfig& model : c.models) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "name" << YAML::Value << model.name;
      out << YAML::Key << "path" << YAML::Value << model.path;
      out << YAML::Key << "default" << YAML::Value << model.is_default << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }

  out << YAML::Key << "logging" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "level" << YAML::Value << c.logging.level;
  out << YAML::Key << "format" << YAML::Value
      << (c.logging.format == LogFormat::kText ? "text" : "json");
  out << YAML::Key << "access_log_sample" << YAML::Value << DoubleText(c.logging.access_log_sample);
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str());
}

}  // namespace fuserank::server
