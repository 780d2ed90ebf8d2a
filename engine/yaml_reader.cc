// yaml-cpp reports errors by throwing: every call that may throw (Load, as<T>) is wrapped
// here.
#include "engine/yaml_reader.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/strip.h"
#include "engine/escape_text.h"

namespace fuserank::engine {
namespace {

constexpr size_t kQuoted = 64;  // bytes of a document's text quoted back in a message

// A scalar written without quotes or a tag: the only kind read as a number or a boolean
// (a quoted "4" is a string; "!!str 4" or "!custom 4" is not read as 4 either).
bool Plain(const YAML::Node& node) { return node.IsScalar() && node.Tag() == "?"; }

// Converts a plain scalar with yaml-cpp's reader.
template <typename T>
bool ConvertScalar(const YAML::Node& node, T* out) {
  if (!Plain(node)) return false;
  try {
    *out = node.as<T>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

// An optional '-' and decimal digits, without a leading zero ("0" itself is one). yaml-cpp
// reads more as integers -- 0x10 and 0o20 as 16, 020 as octal 16, +20 as 20 -- so that
// max_batch_wait_us: 0200 would silently mean 128; those are refused instead.
bool DecimalInteger(absl::string_view text) {
  if (absl::ConsumePrefix(&text, "-") && text.empty()) return false;
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A 64-bit integer out of `node`, or the reason it is not one (after "must be ..." or "is
// ...", as `noun` says: "an integer", "an integer or auto").
bool ReadInteger(const YAML::Node& node, absl::string_view noun, int64_t* out,
                 std::string* problem) {
  if (Plain(node) && DecimalInteger(node.Scalar())) {
    if (ConvertScalar(node, out)) return true;
    *problem = absl::StrCat("is out of range (a 64-bit integer), got ", DescribeYaml(node));
    return false;
  }
  int64_t unused = 0;
  if (ConvertScalar(node, &unused)) {
    *problem = absl::StrCat("must be ", noun,
                            " written in decimal (no leading zero, sign + or 0x/0o prefix: YAML "
                            "would read 0200 as octal 128), got ",
                            DescribeYaml(node));
    return false;
  }
  *problem = absl::StrCat("must be ", noun, ", got ", DescribeYaml(node));
  return false;
}

// YAML 1.2's booleans; yaml-cpp also takes YAML 1.1's y/n/yes/no/on/off, which are refused
// so that a value means the same to every reader of the file.
bool ReadBool(const YAML::Node& node, bool* out) {
  if (!Plain(node)) return false;
  const std::string& text = node.Scalar();
  if (text == "true" || text == "True" || text == "TRUE") {
    *out = true;
    return true;
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    *out = false;
    return true;
  }
  return false;
}

// The parser's events, dropped but for the first anchor or alias, which is kept: the
// documents of a text are counted with it, and anchors are refused (below).
class ScanEvents : public YAML::EventHandler {
 public:
  // Where the first anchor (&name) or alias (*name) is, and its name when yaml-cpp gives it.
  std::optional<YAML::Mark> anchor;
  std::string anchor_name;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t id) override { Node(mark, id); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Note(mark, ""); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t id,
                const std::string&) override {
    Node(mark, id);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t id,
                       YAML::EmitterStyle::value) override {
    Node(mark, id);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t id,
                  YAML::EmitterStyle::value) override {
    Node(mark, id);
  }
  void OnMapEnd() override {}
  void OnAnchor(const YAML::Mark& mark, const std::string& name) override { Note(mark, name); }

 private:
  void Node(const YAML::Mark& mark, YAML::anchor_t id) {
    if (id != YAML::NullAnchor) Note(mark, "");
  }
  void Note(const YAML::Mark& mark, const std::string& name) {
    if (anchor.has_value()) return;
    anchor = mark;
    anchor_name = name;
  }
};

std::string Position(const YAML::Mark& mark) {
  return absl::StrCat("line ", mark.line + 1, ", column ", mark.column + 1);
}

bool FitsInt(int64_t value) {
  return value >= std::numeric_limits<int>::min() && value <= std::numeric_limits<int>::max();
}

}  // namespace

std::optional<YAML::Node> LoadYaml(absl::string_view text, ErrorList* errors) {
  try {
    const std::string owned(text);
    // yaml-cpp's Load reads the first document and drops the rest without a word, so the
    // documents are counted first (and anchors looked for), at most two: its LoadAll never ends on
    // some malformed text (the parser keeps finding empty documents), and Load reads that text as
    // one empty document, i.e. all defaults.
    std::istringstream in(owned);
    YAML::Parser parser(in);
    ScanEvents scan;
    if (parser.HandleNextDocument(scan) && parser.HandleNextDocument(scan)) {
      errors->Add("(file)",
                  "holds more than one YAML document, or text YAML cannot read as one (a "
                  "second document after ---, or a stray ',' at the top level); give one");
      return std::nullopt;
    }
    // An alias stands for its anchor's whole node wherever it is used, so a text of a few
    // KB can stand for millions of keys (each read and reported again): refused outright.
    if (scan.anchor.has_value()) {
      errors->Add(Position(*scan.anchor),
                  absl::StrCat("YAML anchors (&name) and aliases (*name) are not accepted",
                               scan.anchor_name.empty()
                                   ? ""
                                   : absl::StrCat(" (anchor '&",
                                                  EscapeText(scan.anchor_name, kQuoted), "')"),
                               "; write each value out where it is used"));
      return std::nullopt;
    }
    return YAML::Load(owned);
  } catch (const YAML::Exception& e) {
    errors->Add(Position(e.mark),
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
      if (node.Tag() == "!") return absl::StrCat("the string '", text, "'");
      if (node.Tag() != "?") {
        return absl::StrCat("'", text, "' tagged ", EscapeText(node.Tag(), kQuoted));
      }
      return absl::StrCat("'", text, "'");
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
    if (!index_.emplace(key, entries_.size()).second) {  // a set: a map of 30k keys stays fast
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
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  used_[it->second] = true;
  return entries_[it->second].second;
}

std::optional<YAML::Node> YamlMap::Section(absl::string_view key) {
  std::optional<YAML::Node> node = Find(key);
  if (!node || node->IsMap() || node->IsNull()) return node;
  errors_->Add(Key(key), absl::StrCat("must be a map, got ", DescribeYaml(*node)));
  return std::nullopt;
}

void YamlMap::Require(std::initializer_list<absl::string_view> keys) {
  for (absl::string_view key : keys) {
    if (!index_.contains(key)) errors_->Add(Key(key), "missing");
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
  if (ReadBool(*node, out)) return true;
  errors_->Add(Key(key), absl::StrCat("must be true or false, got ", DescribeYaml(*node)));
  return false;
}

bool YamlMap::Int64(absl::string_view key, int64_t* out) {
  std::optional<YAML::Node> node = Find(key);
  if (!node) return false;
  std::string problem;
  if (ReadInteger(*node, "an integer", out, &problem)) return true;
  errors_->Add(Key(key), problem);
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
  if (Plain(*node) && node->Scalar() == "auto") {
    *is_auto = true;
    return true;
  }
  int64_t wide = 0;
  std::string problem;
  if (!ReadInteger(*node, "an integer or auto", &wide, &problem)) {
    errors_->Add(Key(key), problem);
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
    std::string problem;
    if (!ReadInteger(item, "an integer", &wide, &problem)) {
      errors_->Add(item_key, problem);
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
  const std::string reason =
      absl::StrCat("unknown key (known here: ", absl::StrJoin(known_, ", "), ")");
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (!used_[i]) errors_->Add(Key(entries_[i].first), reason);
  }
}

}  // namespace fuserank::engine
