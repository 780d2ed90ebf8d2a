// YAML -> Config and Config -> YAML, both driven by the key table (server/config_keys.h).
// Types, duplicate and unknown keys are checked by the one YAML reader
// (engine/yaml_reader.h); values and cross-key rules by ValidateConfig.
#include "server/config.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/error_list.h"
#include "engine/regular_file.h"
#include "engine/yaml_reader.h"
#include "server/config_keys.h"
#include "server/config_validation.h"

namespace fuserank::server {
namespace {

// Reads the keys below `path` ("" for the top level) out of `map`, which holds them, and
// recurses into their sections.
void ReadSection(engine::YamlMap& map, absl::string_view path, Config* config) {
  std::vector<std::string> sections;
  for (const ConfigKey& key : ConfigKeys()) {
    absl::string_view rest = key.path;
    if (!path.empty()) {
      if (!absl::StartsWith(rest, path) || rest.size() <= path.size() || rest[path.size()] != '.') {
        continue;
      }
      rest.remove_prefix(path.size() + 1);
    }
    const size_t dot = rest.find('.');
    if (dot == absl::string_view::npos) {
      if (map.Find(rest)) config->given_keys.push_back(key.path);
      key.read(map, rest, config);
      continue;
    }
    const std::string child(rest.substr(0, dot));
    if (std::find(sections.begin(), sections.end(), child) != sections.end()) continue;
    sections.push_back(child);
    const std::string child_path = path.empty() ? child : absl::StrCat(path, ".", child);
    if (std::optional<YAML::Node> node = map.Section(child)) {
      engine::YamlMap section(*node, child_path, map.errors());
      ReadSection(section, child_path, config);
      section.ReportUnknown();
    }
  }
}

constexpr size_t kCommentColumn = 34;  // where a key's comment starts in the reference
constexpr size_t kWidth = 100;         // lines of the reference file wrap before this

// Appends `line`, then `comment` wrapped into "# ..." lines starting at `column`.
void AppendCommented(std::string* out, std::string line, size_t column, absl::string_view comment) {
  if (comment.empty()) {
    absl::StrAppend(out, line, "\n");
    return;
  }
  line.append(line.size() + 2 > column ? 2 : column - line.size(), ' ');
  line += "#";
  size_t words_on_line = 0;
  for (absl::string_view word : absl::StrSplit(comment, ' ', absl::SkipEmpty())) {
    if (words_on_line > 0 && line.size() + 1 + word.size() > kWidth) {
      absl::StrAppend(out, line, "\n");
      line = std::string(column, ' ') + "#";
      words_on_line = 0;
    }
    absl::StrAppend(&line, " ", word);
    ++words_on_line;
  }
  absl::StrAppend(out, line, "\n");
}

std::string KeyComment(const ConfigKey& key) {
  if (key.constraint.empty()) return key.doc;
  if (key.doc.empty()) return key.constraint;
  return absl::StrCat(key.constraint, "; ", key.doc);
}

const ConfigSection* FindSection(absl::string_view path) {
  for (const ConfigSection& section : ConfigSections()) {
    if (section.path == path) return &section;
  }
  return nullptr;
}

// The keys of `config` as YAML; `reference`: with the comments of config/fuserank.yaml.
std::string Render(const Config& config, bool reference) {
  std::string out;
  std::vector<std::string> open;  // the sections the last key was written in
  for (const ConfigKey& key : ConfigKeys()) {
    if (key.present && !key.present(config)) continue;
    std::vector<std::string> parts = absl::StrSplit(key.path, '.');
    const std::string name = parts.back();
    parts.pop_back();
    size_t common = 0;
    while (common < open.size() && common < parts.size() && open[common] == parts[common]) {
      ++common;
    }
    open.resize(common);
    for (size_t i = common; i < parts.size(); ++i) {
      open.push_back(parts[i]);
      const std::string indent(2 * i, ' ');
      const ConfigSection* section = FindSection(absl::StrJoin(open, "."));
      if (reference && i == 0) out += "\n";
      if (reference && section != nullptr && !section->doc.empty()) {
        for (absl::string_view doc_line : absl::StrSplit(section->doc, '\n')) {
          absl::StrAppend(&out, indent, "# ", doc_line, "\n");
        }
      }
      absl::StrAppend(&out, indent, parts[i], ":\n");
    }
    const std::string line =
        absl::StrCat(std::string(2 * parts.size(), ' '), name, ": ", key.value(config));
    AppendCommented(&out, line, kCommentColumn, reference ? KeyComment(key) : "");
  }
  return out;
}

constexpr char kReferenceHeader[] =
    "# fuserank server config (SPEC section 5): every key, with its default, its range or\n"
    "# choices and what it does. Every key is optional; unknown keys, wrong types, bad\n"
    "# values and YAML anchors or aliases stop the server before it listens. Check a\n"
    "# config without starting:\n"
    "#   fuserank-server --check-config config/fuserank.yaml\n"
    "# Written from the key table (server/config_keys.cc) by\n"
    "#   fuserank-server --print-reference-config > config/fuserank.yaml\n";

}  // namespace

absl::StatusOr<Config> ParseConfig(absl::string_view yaml_text, absl::string_view file) {
  Config config;
  config.file = std::string(file);
  engine::ErrorList errors(config.file.empty() ? "<config>" : config.file);
  std::optional<YAML::Node> root = engine::LoadYaml(yaml_text, &errors);
  if (!root) return errors.ToStatus();
  if (!root->IsMap() && !root->IsNull()) {
    errors.Add("(top level)",
               absl::StrCat("must be a map of sections, got ", engine::DescribeYaml(*root)));
    return errors.ToStatus();
  }
  engine::YamlMap map(*root, "", &errors);
  ReadSection(map, "", &config);
  map.ReportUnknown();
  ValidateConfig(config, &errors);
  if (!errors.empty()) return errors.ToStatus();
  return config;
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  // A directory, FIFO or device is refused (a directory would otherwise read as an empty
  // file, so all defaults; a FIFO would block the start), as is a file past the bound.
  absl::StatusOr<std::string> text = engine::ReadRegularFile(path, kMaxConfigBytes, "config");
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path);
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

std::string EffectiveConfigYaml(const Config& config) { return Render(config, false); }

std::string ReferenceConfigYaml() { return absl::StrCat(kReferenceHeader, Render(Config{}, true)); }

}  // namespace fuserank::server
