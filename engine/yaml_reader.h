// The one reader of fuserank's YAML documents (the server config and model specs): typed
// values out of yaml-cpp nodes with one rule set. A key given twice is an error; numbers
// and booleans must be plain scalars (a quoted "4" is a string, never a number); every key
// a reader did not ask for is reported as unknown, naming the keys it knows; every problem
// goes to an ErrorList as "<file>: <key path>: <reason>". YAML anchors (&a) and aliases (*a)
// are refused: an alias repeats its anchor's node without repeating its text, so a small
// file could stand for millions of keys. No exception leaves this unit
// (yaml-cpp's are caught here). Single-threaded; a YamlMap reads one map once.
#ifndef FUSERANK_ENGINE_YAML_READER_H_
#define FUSERANK_ENGINE_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "engine/error_list.h"

namespace fuserank::engine {

// Parses `text`. A syntax error, a second document, or an anchor or alias is added to
// `errors` (under "line L, column C" where the parser says) and gives nullopt; empty text is
// a null node.
std::optional<YAML::Node> LoadYaml(absl::string_view text, ErrorList* errors);

// What a node is, for a message: "a map", "a list", "nothing (null)", "'5'" for a plain
// scalar and "the string '5'" for a quoted one (escaped and cut: engine/escape_text.h).
std::string DescribeYaml(const YAML::Node& node);

class YamlMap {
 public:
  // `node`: a map, or null (no keys). `path`: the map's own key path, "" at the top level
  // ("server", "tables[0]"); keys read here are reported as "<path>.<key>".
  YamlMap(const YAML::Node& node, std::string path, ErrorList* errors);

  // "<path>.<key>" (the key escaped).
  std::string Key(absl::string_view key) const;

  // The node under `key`, or nullopt when absent; marks `key` as known either way.
  std::optional<YAML::Node> Find(absl::string_view key);
  // A nested map, or null for "all defaults"; anything else is an error (nullopt).
  std::optional<YAML::Node> Section(absl::string_view key);
  // Adds "<key>: missing" for each of `keys` that is absent.
  void Require(std::initializer_list<absl::string_view> keys);

  // Each reader leaves *out alone when the key is absent (false) or its value is wrong
  // (false, problem added); true when it stored a value.
  bool String(absl::string_view key, std::string* out);
  bool Bool(absl::string_view key, bool* out);
  bool Int(absl::string_view key, int* out);  // an integer that fits an int
  bool Int64(absl::string_view key, int64_t* out);
  bool Double(absl::string_view key, double* out);
  // An integer, or the plain scalar `auto` (sets *is_auto and leaves *out alone).
  bool IntOrAuto(absl::string_view key, int* out, bool* is_auto);
  // Lists: null is absent; `example` (may be "") follows the expected type in a message.
  bool StringList(absl::string_view key, std::vector<std::string>* out);
  bool IntList(absl::string_view key, std::vector<int>* out, absl::string_view example = "");

  // One of `choices` (pairs of name and value), by name; the message lists the names joined
  // by `separator`.
  template <typename E, typename Choices = std::initializer_list<std::pair<absl::string_view, E>>>
  bool Enum(absl::string_view key, const Choices& choices, E* out,
            absl::string_view separator = "|") {
    std::optional<YAML::Node> node = Find(key);
    if (!node) return false;
    std::vector<absl::string_view> names;
    for (const auto& [name, value] : choices) {
      if (node->IsScalar() && node->Scalar() == name) {
        *out = value;
        return true;
      }
      names.push_back(name);
    }
    errors_->Add(Key(key), absl::StrCat("must be one of ", absl::StrJoin(names, separator),
                                        ", got ", DescribeYaml(*node)));
    return false;
  }

  // Adds "<key>: unknown key (known here: ...)" for every key no Find asked for.
  void ReportUnknown();

  ErrorList* errors() const { return errors_; }

 private:
  std::string path_;
  ErrorList* errors_;
  std::vector<std::pair<std::string, YAML::Node>> entries_;  // first of each key, in order
  absl::flat_hash_map<std::string, size_t> index_;           // key -> its place in entries_
  std::vector<bool> used_;
  std::vector<std::string> known_;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_YAML_READER_H_
