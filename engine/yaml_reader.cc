// yaml-cpp reports errors by throwing: every call that may throw (Load, as<T>) is wrapped
// here.
#include "engine/yaml_reader.h"

#include <exception>
#include <limits>

#include "engine/escape_text.h"

namespace fuserank::engine {
namespace {

constexpr size_t kQuoted = 64;  // bytes of a document's text quoted back in a message

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

bool FitsInt(int64_t value) {
  return value >= std::numeric_limits<int>::min() && value <= std::numeric_limits<int>::max();
}

}  // namespace

std::optional<YAML::Node> LoadYaml(absl::string_view text, ErrorList* errors) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    errors->Add(absl::StrCat("line ", e.mark.line + 1, ", column ", e.mark.column + 1),
                absl::StrCat("YAML syntax error (invalid YAML): ", EscapeText(e.msg)));
  } catch (const std::exception& e) {
    errors->Add("(file)", absl::StrCat("cannot parse: ", EscapeText(e.what())));
  }
  return std::nullopt;
}

std::string DescribeYaml(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar: {
      const std::string text = EscapeText(node.Scalar(), kQuoted);
      return node.Tag() == "!" ? absl::StrCat("the string '", text, "'")
                               : absl::StrCat("'", text, "'");
    }
    default:
      return "nothing (null)";
  }
}

YamlMap::YamlMap(const YAML::Node& node, std::string path, ErrorList* errors)
    : path_(std::move(path)), errors_(errors) {
  if (!node.IsMap()) return;  // callers pass maps or null
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string key = it->first.IsScalar() ? it->first.Scalar() : "<non-scalar key>";
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

std::string YamlMap::Key(absl::string_view key) const {
  const std::string escaped = EscapeText(key, kQuoted);
  return path_.empty() ? escaped : absl::StrCat(path_, ".", escaped);
}

std::optional<YAML::Node> YamlMap::Find(absl::string_view key) {
  bool listed = false;
  for (const std::string& known : known_) listed |= known == key;
  if (!listed) known_.emplace_back(key);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].first == key) {
      used_[i] = true;
      return entries_[i].second;
    }
  }
  return std::nullopt;
}

std::optional<YAML::Node> YamlMap::Section(absl::string_view key) {
  std::optional<YAML::Node> node = Find(key);
  if (!node || node->IsMap() || node->IsNull()) return node;
  errors_->Add(Key(key), absl::StrCat("must be a map, got ", DescribeYaml(*node)));
  return std::nullopt;
}

void YamlMap::Require(std::initializer_list<absl::string_view> keys) {
  for (absl::string_view key : keys) {
    bool present = false;
    for (const auto& entry : entries_) present |= entry.first == key;
    if (!present) errors_->Add(Key(key), "missing");
  }
}

bool YamlMap::String(absl::string_view key, std::string* out) {
  std::optional<YAML::Node> node = Find(key);
  if (!node) return false;
  if (!node->IsScalar()) {
    errors_->Add(Key(key), absl::StrCat("must be a string, got ", DescribeYaml(*node)));
    return false;
  }
  *out = node->Scalar();
  return true;
}

bool YamlMap::Bool(absl::string_view key, bool* out) {
  std::optional<YAML::Node> node = Find(key);
  if (!node) return false;
  if (ConvertScalar(*node, out)) return true;
  errors_->Add(Key(key), absl::StrCat("must be true or false, got ", DescribeYaml(*node)));
  return false;
}

bool YamlMap::Int64(absl::string_view key, int64_t* out) {
  std::optional<YAML::Node> node = Find(key);
  if (!node) return false;
  if (ConvertScalar(*node, out)) return true;
  errors_->Add(Key(key), absl::StrCat("must be an integer, got ", DescribeYaml(*node)));
  return false;
}

bool YamlMap::Int(absl::string_view key, int* out) {
  int64_t wide = 0;
  if (!Int64(key, &wide)) return false;
  if (!FitsInt(wide)) {
    errors_->Add(Key(key), absl::StrCat("is out of range, got ", wide));
    return false;
  }
  *out = static_cast<int>(wide);
  return true;
}

bool YamlMap::Double(absl::string_view key, double* out) {
  std::optional<YAML::Node> node = Find(key);
  if (!node) return false;
  if (ConvertScalar(*node, out)) return true;
  errors_->Add(Key(key), absl::StrCat("must be a number, got ", DescribeYaml(*node)));
  return false;
}

bool YamlMap::IntOrAuto(absl::string_view key, int* out, bool* is_auto) {
  std::optional<YAML::Node> node = Find(key);
  if (!node) return false;
  if (node->IsScalar() && node->Tag() != "!" && node->Scalar() == "auto") {
    *is_auto = true;
    return true;
  }
  int64_t wide = 0;
  if (!ConvertScalar(*node, &wide)) {
    errors_->Add(Key(key), absl::StrCat("must be an integer or auto, got ", DescribeYaml(*node)));
    return false;
  }
  if (!FitsInt(wide)) {
    errors_->Add(Key(key), absl::StrCat("is out of range, got ", wide));
    return false;
  }
  *out = static_cast<int>(wide);
  *is_auto = false;
  return true;
}

bool YamlMap::StringList(absl::string_view key, std::vector<std::string>* out) {
  std::optional<YAML::Node> node = Find(key);
  if (!node || node->IsNull()) return false;
  if (!node->IsSequence()) {
    errors_->Add(Key(key), absl::StrCat("must be a list of strings, got ", DescribeYaml(*node)));
    return false;
  }
  out->clear();
  bool ok = true;
  for (size_t i = 0; i < node->size(); ++i) {
    const YAML::Node item = (*node)[i];
    if (!item.IsScalar()) {
      errors_->Add(absl::StrCat(Key(key), "[", i, "]"),
                   absl::StrCat("must be a string, got ", DescribeYaml(item)));
      ok = false;
      continue;
    }
    out->push_back(item.Scalar());
  }
  return ok;
}

bool YamlMap::IntList(absl::string_view key, std::vector<int>* out, absl::string_view example) {
  std::optional<YAML::Node> node = Find(key);
  if (!node || node->IsNull()) return false;
  const std::string what =
      example.empty() ? "a list of integers" : absl::StrCat("a list of integers, e.g. ", example);
  if (!node->IsSequence()) {
    errors_->Add(Key(key), absl::StrCat("must be ", what, ", got ", DescribeYaml(*node)));
    return false;
  }
  out->clear();
  bool ok = true;
  for (size_t i = 0; i < node->size(); ++i) {
    const YAML::Node item = (*node)[i];
    const std::string item_key = absl::StrCat(Key(key), "[", i, "]");
    int64_t wide = 0;
    if (!ConvertScalar(item, &wide)) {
      errors_->Add(item_key, absl::StrCat("must be an integer, got ", DescribeYaml(item)));
      ok = false;
    } else if (!FitsInt(wide)) {
      errors_->Add(item_key, absl::StrCat("is out of range, got ", wide));
      ok = false;
    }
    out->push_back(FitsInt(wide) ? static_cast<int>(wide) : 0);
  }
  return ok;
}

void YamlMap::ReportUnknown() {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (used_[i]) continue;
    errors_->Add(Key(entries_[i].first),
                 absl::StrCat("unknown key (known here: ", absl::StrJoin(known_, ", "), ")"));
  }
}

}  // namespace fuserank::engine
