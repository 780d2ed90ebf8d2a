// The factories of the server's config key table (server/config_keys.cc): each turns a
// key's type, Config member and range into its reader, its text for the effective-config
// dump and its check. Internal to the key table; not an interface.
#ifndef FUSERANK_SERVER_CONFIG_KEY_FACTORIES_H_
#define FUSERANK_SERVER_CONFIG_KEY_FACTORIES_H_

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "engine/error_list.h"
#include "engine/yaml_reader.h"
#include "server/config_keys.h"

namespace fuserank::server::config_key_factories {

using engine::ErrorList;
using engine::YamlMap;

// The member of Config a key fills, as a generic accessor usable on const and non-const.
#define FUSERANK_MEMBER(m) \
  [](auto& c) -> auto& { return c.m; }

// Shortest text that reads back as the same double.
inline std::string DoubleText(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, end);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

// Writes `value` as yaml-cpp would, but double-quoted (so escaped) when it holds a control
// character: yaml-cpp writes a carriage return into a plain scalar, which then reads back
// as a line break, and the effective config would not read back as itself.
inline void EmitString(YAML::Emitter& out, const std::string& value) {
  const bool control = std::any_of(value.begin(), value.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (control) out << YAML::DoubleQuoted;
  out << value;
}

inline std::string Text(const std::string& value) {
  YAML::Emitter out;
  EmitString(out, value);
  return out.c_str();
}
inline std::string Text(bool value) { return value ? "true" : "false"; }
inline std::string Text(int value) { return absl::StrCat(value); }
inline std::string Text(int64_t value) { return absl::StrCat(value); }
inline std::string Text(double value) { return DoubleText(value); }
inline std::string Text(const std::vector<std::string>& values) {
  YAML::Emitter out;
  out << YAML::Flow << YAML::BeginSeq;
  for (const std::string& value : values) EmitString(out, value);
  out << YAML::EndSeq;
  return out.c_str();
}

inline void Read(YamlMap& map, absl::string_view name, std::string* out) { map.String(name, out); }
inline void Read(YamlMap& map, absl::string_view name, bool* out) { map.Bool(name, out); }
inline void Read(YamlMap& map, absl::string_view name, int* out) { map.Int(name, out); }
inline void Read(YamlMap& map, absl::string_view name, int64_t* out) { map.Int64(name, out); }
inline void Read(YamlMap& map, absl::string_view name, double* out) { map.Double(name, out); }
inline void Read(YamlMap& map, absl::string_view name, std::vector<std::string>* out) {
  map.StringList(name, out);
}

// A key of any value type, no range.
template <typename Access>
ConfigKey Plain(std::string path, Access access, std::string doc) {
  ConfigKey key;
  key.path = std::move(path);
  key.doc = std::move(doc);
  key.read = [access](YamlMap& map, absl::string_view name, Config* config) {
    Read(map, name, &access(*config));
  };
  key.value = [access](const Config& config) { return Text(access(config)); };
  return key;
}

// A number in lo..hi; with `zero_is_auto`, 0 too (the value is derived at start).
template <typename T, typename Access>
ConfigKey Ranged(std::string path, Access access, T lo, T hi, std::string doc,
                 bool zero_is_auto = false) {
  ConfigKey key = Plain(path, access, std::move(doc));
  key.constraint = absl::StrCat(zero_is_auto ? "0 or " : "", lo, "..", hi);
  key.check = [path, access, lo, hi, zero_is_auto](const Config& config, ErrorList* errors) {
    const auto value = access(config);
    static_assert(std::is_same_v<std::decay_t<decltype(value)>, T>, "range of another type");
    if (zero_is_auto && value == 0) return;
    if (!(value >= lo && value <= hi)) {
      errors->Add(path, absl::StrCat("must be in ", lo, "..", hi, ", got ", Text(value)));
    }
  };
  return key;
}

template <typename E>
using Choices = std::vector<std::pair<absl::string_view, E>>;

template <typename E>
std::string ChoiceNames(const Choices<E>& choices, absl::string_view separator) {
  std::vector<absl::string_view> names;
  for (const auto& choice : choices) names.push_back(choice.first);
  return absl::StrJoin(names, separator);
}

// One of `choices`, read by name.
template <typename E, typename Access>
ConfigKey Enum(std::string path, Access access, Choices<E> choices, std::string doc) {
  ConfigKey key;
  key.path = std::move(path);
  key.doc = std::move(doc);
  key.constraint = ChoiceNames(choices, " | ");
  key.read = [access, choices](YamlMap& map, absl::string_view name, Config* config) {
    map.Enum(name, choices, &access(*config));
  };
  key.value = [access, choices](const Config& config) {
    for (const auto& [name, value] : choices) {
      if (value == access(config)) return std::string(name);
    }
    return std::string("?");
  };
  return key;
}

// A string that must be one of `choices` (checked after reading, like a range).
template <typename Access>
ConfigKey StringChoice(std::string path, Access access, std::vector<absl::string_view> choices,
                       std::string doc) {
  ConfigKey key = Plain(path, access, std::move(doc));
  key.constraint = absl::StrJoin(choices, " | ");
  key.check = [path, access, choices](const Config& config, ErrorList* errors) {
    const std::string& value = access(config);
    for (absl::string_view choice : choices) {
      if (value == choice) return;
    }
    errors->Add(
        path, absl::StrCat("must be one of ", absl::StrJoin(choices, "|"), ", got '", value, "'"));
  };
  return key;
}

}  // namespace fuserank::server::config_key_factories

#endif  // FUSERANK_SERVER_CONFIG_KEY_FACTORIES_H_
