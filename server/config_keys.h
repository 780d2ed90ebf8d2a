// The declaration of every server config key, once: its YAML path, the Config member it
// fills, its allowed range or choices and a one-line doc (its default is the member's
// initialiser, from engine/config_defaults.h). The table drives reading (config.cc),
// the per-key checks (config_validation.cc adds the rules between keys), the effective-
// config dump and the reference file config/fuserank.yaml. Built once; read-only after.
#ifndef FUSERANK_SERVER_CONFIG_KEYS_H_
#define FUSERANK_SERVER_CONFIG_KEYS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/error_list.h"
#include "engine/yaml_reader.h"
#include "server/config.h"

namespace fuserank::server {

struct ConfigKey {
  std::string path;        // dotted YAML path ("engine.streams")
  std::string doc;         // what the key does, for the reference file
  std::string constraint;  // "1..64", "auto | cpu | cuda", or "" when any value is valid
  // Reads the key, named `name` in `map` (the map of its parent path), into `config`.
  std::function<void(engine::YamlMap& map, absl::string_view name, Config* config)> read;
  // The key's value in `config` as one line of YAML (a scalar or a flow collection).
  std::function<std::string(const Config& config)> value;
  // Adds the key's range or choice problem, if any; empty for keys without one.
  std::function<void(const Config& config, engine::ErrorList* errors)> check;
  // Whether the dump writes the key; empty: always.
  std::function<bool(const Config& config)> present;
  // Read by the CUDA backend alone: given under engine.device: cpu, the start warns that
  // it has no effect (ConfigWarnings, config_validation.h).
  bool cuda_only = false;
};

// A section's doc, written above it in the reference file.
struct ConfigSection {
  std::string path;  // "server", "server.tls"
  std::string doc;
};

// Every key, in the order the reference file lists them (grouped by section).
const std::vector<ConfigKey>& ConfigKeys();
const std::vector<ConfigSection>& ConfigSections();

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_CONFIG_KEYS_H_
