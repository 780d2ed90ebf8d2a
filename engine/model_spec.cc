// Model spec YAML <-> ModelSpec. yaml-cpp throws; every call into it is wrapped here so
// no exception leaves this file. Parsing checks types, enums and unknown keys; the ranges
// and cross-field rules live in ValidateModelSpec so specs built in code get them too.
#include "engine/model_spec.h"

#include <cstdint>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "engine/escape_text.h"
#include "engine/regular_file.h"
#include "engine/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace fuserank::engine {
namespace {

constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max();  // 2^31 - 1
constexpr int64_t kMaxWidth = int64_t{1} << 20;       // any one dim, dense count or layer width
constexpr int64_t kMaxTotalWidth = int64_t{1} << 24;  // concat(V) and the interaction output
constexpr size_t kMaxNameBytes = 256;                 // name, version, table names
constexpr size_t kQuoted = 64;  // bytes of a spec value quoted back in a message

// Collects problems as "field: reason" so one pass reports all of them.
class Problems {
 public:
  void Add(absl::string_view field, absl::string_view reason) {
    list_.push_back(absl::StrCat(field, ": ", reason));
  }
  bool empty() const { return list_.empty(); }
  absl::Status ToStatus() const {
    if (list_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(list_, "; "));
  }

 private:
  std::vector<std::string> list_;
};

// Reads typed scalars out of YAML nodes, turning yaml-cpp exceptions into Problems.
class Reader {
 public:
  explicit Reader(Problems* problems) : problems_(problems) {}

  bool String(const YAML::Node& node, absl::string_view field, std::string* out) {
    if (!node.IsScalar()) return Fail(field, "must be a string");
    *out = node.Scalar();
    return true;
  }

  bool Int(const YAML::Node& node, absl::string_view field, int64_t* out) {
    if (!node.IsScalar()) return Fail(field, "must be an integer");
    try {
      *out = node.as<int64_t>();
      return true;
    } catch (const YAML::Exception&) {
      return Fail(field, absl::StrCat("must be an integer, got '",
                                      EscapeText(node.Scalar(), kQuoted), "'"));
    }
  }

  // An int field that must fit an `int` (ranges are checked later by validation).
  bool SmallInt(const YAML::Node& node, absl::string_view field, int* out) {
    int64_t value = 0;
    if (!Int(node, field, &value)) return false;
    if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
      return Fail(field, absl::StrCat("out of range, got ", value));
    }
    *out = static_cast<int>(value);
    return true;
  }

  bool IntList(const YAML::Node& node, absl::string_view field, std::vector<int>* out) {
    if (!node.IsSequence()) return Fail(field, "must be a list of integers, e.g. [64, 16]");
    out->clear();
    bool ok = true;
    for (size_t i = 0; i < node.size(); ++i) {
      int value = 0;
      ok = SmallInt(node[i], absl::StrCat(field, "[", i, "]"), &value) && ok;
      out->push_back(value);
    }
    return ok;
  }

  // Parses one of `names` into the enum value at the same index of `values`.
  template <typename E>
  bool Enum(const YAML::Node& node, absl::string_view field,
            std::initializer_list<std::pair<absl::string_view, E>> choices, E* out) {
    std::string text;
    if (!String(node, field, &text)) return false;
    std::vector<absl::string_view> names;
    for (const auto& [name, value] : choices) {
      if (text == name) {
        *out = value;
        return true;
      }
      names.push_back(name);
    }
    return Fail(field, absl::StrCat("must be one of ", absl::StrJoin(names, " | "), ", got '",
                                    EscapeText(text, kQuoted), "'"));
  }

  // Reports every key of `map` that is not in `known`.
  void UnknownKeys(const YAML::Node& map, absl::string_view prefix,
                   std::initializer_list<absl::string_view> known) {
    for (const auto& kv : map) {
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "<non-scalar key>";
      bool found = false;
      for (absl::string_view k : known) found = found || key == k;
      if (!found) {
        problems_->Add(
            absl::StrCat(prefix, EscapeText(key, kQuoted)),
            absl::StrCat("unknown key (expected one of: ", absl::StrJoin(known, ", "), ")"));
      }
    }
  }

  bool Fail(absl::string_view field, absl::string_view reason) {
    problems_->Add(field, reason);
    return false;
  }

 private:
  Problems* problems_;
};

void ParseTable(Reader& r, const YAML::Node& node, size_t index, TableSpec* t) {
  const std::string p = absl::StrCat("tables[", index, "]");
  if (!node.IsMap()) {
    r.Fail(p, "must be a map like {name: user_id, side: user, rows: 1000, dim: 16}");
    return;
  }
  r.UnknownKeys(node, p + ".", {"name", "side", "rows", "dim", "pooling", "oov"});
  for (const char* required : {"name", "side", "rows", "dim"}) {
    if (!node[required]) r.Fail(absl::StrCat(p, ".", required), "missing");
  }
  if (node["name"]) r.String(node["name"], p + ".name", &t->name);
  if (node["side"]) {
    r.Enum<Side>(node["side"], p + ".side", {{"user", Side::kUser}, {"item", Side::kItem}},
                 &t->side);
  }
  if (node["rows"]) r.Int(node["rows"], p + ".rows", &t->rows);
  if (node["dim"]) r.SmallInt(node["dim"], p + ".dim", &t->dim);
  if (node["pooling"]) {
    r.Enum<Pooling>(node["pooling"], p + ".pooling",
                    {{"sum", Pooling::kSum}, {"mean", Pooling::kMean}}, &t->pooling);
  }
  if (node["oov"]) {
    r.Enum<Oov>(node["oov"], p + ".oov", {{"modulo", Oov::kModulo}, {"reject", Oov::kReject}},
                &t->oov);
  }
}

void ParseRoot(Reader& r, const YAML::Node& root, const std::string& base_dir, ModelSpec* spec) {
  r.UnknownKeys(root, "",
                {"name", "version", "weights", "embedding_dtype", "tables", "dense", "bottom_mlp",
                 "interaction", "cross_dim", "top_mlp"});
  for (const char* required : {"name", "weights", "interaction", "top_mlp"}) {
    if (!root[required]) r.Fail(required, "missing");
  }
  if (root["name"]) r.String(root["name"], "name", &spec->name);
  spec->version = "1";
  if (root["version"]) r.String(root["version"], "version", &spec->version);
  std::string weights;
  if (root["weights"] && r.String(root["weights"], "weights", &weights)) {
    if (weights.empty()) {
      r.Fail("weights", "must name the safetensors file");
    } else {
      std::filesystem::path path(weights);
      spec->weights_path =
          path.is_absolute() ? weights : (std::filesystem::path(base_dir) / path).string();
    }
  }
  if (root["embedding_dtype"]) {
    r.Enum<DType>(root["embedding_dtype"], "embedding_dtype",
                  {{"fp32", DType::kF32},
                   {"fp16", DType::kF16},
                   {"bf16", DType::kBF16},
                   {"int8", DType::kInt8}},
                  &spec->embedding_dtype);
  }
  if (const YAML::Node tables = root["tables"]) {
    if (!tables.IsSequence()) {
      r.Fail("tables", "must be a list of tables");
    } else {
      spec->tables.resize(tables.size());
      for (size_t i = 0; i < tables.size(); ++i) ParseTable(r, tables[i], i, &spec->tables[i]);
    }
  }
  if (const YAML::Node dense = root["dense"]) {
    if (!dense.IsMap()) {
      r.Fail("dense", "must be a map like {user: 4, item: 3}");
    } else {
      r.UnknownKeys(dense, "dense.", {"user", "item"});
      if (dense["user"]) r.SmallInt(dense["user"], "dense.user", &spec->dense_user);
      if (dense["item"]) r.SmallInt(dense["item"], "dense.item", &spec->dense_item);
    }
  }
  if (root["bottom_mlp"] && !root["bottom_mlp"].IsNull()) {
    r.IntList(root["bottom_mlp"], "bottom_mlp", &spec->bottom_mlp);
  }
  if (root["interaction"]) {
    r.Enum<Interaction>(root["interaction"], "interaction",
                        {{"concat", Interaction::kConcat},
                         {"dot", Interaction::kDot},
                         {"linear", Interaction::kLinear}},
                        &spec->interaction);
  }
  if (root["cross_dim"]) r.SmallInt(root["cross_dim"], "cross_dim", &spec->cross_dim);
  if (root["top_mlp"]) r.IntList(root["top_mlp"], "top_mlp", &spec->top_mlp);
}

// Names travel into messages, logs and metric labels: printable UTF-8 of bounded length.
void CheckName(Problems& problems, absl::string_view field, const std::string& name) {
  if (name.size() > kMaxNameBytes) {
    problems.Add(field,
                 absl::StrCat("must be at most ", kMaxNameBytes, " bytes, got ", name.size()));
  } else if (!IsPrintableUtf8(name)) {
    problems.Add(field, absl::StrCat("must be printable UTF-8 without control characters, got '",
                                     EscapeText(name, kQuoted), "'"));
  }
}

void CheckWidth(Problems& problems, absl::string_view field, int64_t value, int64_t min) {
  if (value < min || value > kMaxWidth) {
    problems.Add(field, absl::StrCat("must be in ", min, "..", kMaxWidth, ", got ", value));
  }
}

// Every range and cross-field rule of SPEC section 2, each problem named by its field.
void CheckSpec(const ModelSpec& spec, Problems& problems) {
  if (spec.name.empty()) problems.Add("name", "must not be empty");
  CheckName(problems, "name", spec.name);
  CheckName(problems, "version", spec.version);
  if (spec.weights_path.empty()) problems.Add("weights", "must name the safetensors file");
  std::set<std::string> names;
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    const TableSpec& t = spec.tables[i];
    const std::string p = absl::StrCat("tables[", i, "]");
    if (t.name.empty()) problems.Add(p + ".name", "must not be empty");
    CheckName(problems, p + ".name", t.name);
    if (!t.name.empty() && !names.insert(t.name).second) {
      problems.Add(p + ".name",
                   absl::StrCat("duplicate table name '", EscapeText(t.name, kQuoted), "'"));
    }
    if (t.rows < 1 || t.rows > kMaxRows) {
      problems.Add(p + ".rows", absl::StrCat("must be in 1..", kMaxRows, ", got ", t.rows));
    }
    if (t.dim < 1) {
      problems.Add(p + ".dim", absl::StrCat("must be >= 1, got ", t.dim));
    } else {
      CheckWidth(problems, p + ".dim", t.dim, 1);
    }
  }
  CheckWidth(problems, "dense.user", spec.dense_user, 0);
  CheckWidth(problems, "dense.item", spec.dense_item, 0);
  for (size_t i = 0; i < spec.bottom_mlp.size(); ++i) {
    CheckWidth(problems, absl::StrCat("bottom_mlp[", i, "]"), spec.bottom_mlp[i], 1);
  }
  for (size_t i = 0; i < spec.top_mlp.size(); ++i) {
    CheckWidth(problems, absl::StrCat("top_mlp[", i, "]"), spec.top_mlp[i], 1);
  }
  if (spec.top_mlp.empty()) {
    problems.Add("top_mlp", "must not be empty (the last layer has width 1)");
  } else if (spec.top_mlp.back() != 1) {
    problems.Add(
        absl::StrCat("top_mlp[", spec.top_mlp.size() - 1, "]"),
        absl::StrCat("the last layer must have width 1 (the score), got ", spec.top_mlp.back()));
  }
  if (spec.tables.empty() && spec.dense_total() == 0) {
    problems.Add("tables", "the model needs at least one table or dense feature");
  }
  if (!spec.bottom_mlp.empty() && spec.dense_total() == 0) {
    problems.Add("bottom_mlp", "there are no dense features for it (dense.user + dense.item = 0)");
  }
  if (spec.interaction == Interaction::kLinear) {
    if (spec.cross_dim < 1) {
      problems.Add("cross_dim",
                   absl::StrCat("must be >= 1 with interaction: linear, got ", spec.cross_dim));
    } else {
      CheckWidth(problems, "cross_dim", spec.cross_dim, 1);
    }
  } else if (spec.cross_dim != 0) {
    problems.Add("cross_dim",
                 absl::StrCat("must be 0 unless interaction is linear, got ", spec.cross_dim));
  }
  if (!problems.empty()) return;  // widths below assume sane fields

  if (spec.interaction == Interaction::kDot) {
    const int z = spec.z_width();
    const int d = z > 0 ? z : (spec.tables.empty() ? 0 : spec.tables[0].dim);
    const char* what = z == 0                    ? "tables[0].dim"
                       : spec.bottom_mlp.empty() ? "the dense width dense.user + dense.item"
                                                 : "the last bottom_mlp width";
    for (size_t i = 0; i < spec.tables.size(); ++i) {
      if (spec.tables[i].dim != d) {
        problems.Add(absl::StrCat("tables[", i, "].dim"),
                     absl::StrCat("interaction dot needs every vector the same width: got ",
                                  spec.tables[i].dim, ", expected ", d, " (", what, ")"));
      }
    }
  }
  int64_t concat = spec.z_width();
  for (const TableSpec& t : spec.tables) concat += t.dim;
  const int64_t n = spec.tables.size() + (spec.z_width() > 0 ? 1 : 0);
  if (concat > kMaxTotalWidth || n * (n - 1) / 2 > kMaxTotalWidth) {
    problems.Add("tables",
                 absl::StrCat("the interaction is too wide (limit ", kMaxTotalWidth, ")"));
  } else if (problems.empty() && spec.interaction_width() < 1) {
    problems.Add("interaction", "interaction dot over a single vector gives no features");
  }
}

void EmitIntList(YAML::Emitter& out, const std::vector<int>& list) {
  out << YAML::Flow << YAML::BeginSeq;
  for (int v : list) out << v;
  out << YAML::EndSeq;
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "fp32";
    case DType::kF16:
      return "fp16";
    case DType::kBF16:
      return "bf16";
    case DType::kInt8:
      return "int8";
  }
  return "?";
}

std::string_view InteractionName(Interaction interaction) {
  switch (interaction) {
    case Interaction::kConcat:
      return "concat";
    case Interaction::kDot:
      return "dot";
    case Interaction::kLinear:
      return "linear";
  }
  return "?";
}

int ModelSpec::z_width() const {
  if (dense_total() == 0) return 0;
  return bottom_mlp.empty() ? dense_total() : bottom_mlp.back();
}

int ModelSpec::concat_width() const {
  int width = z_width();
  for (const TableSpec& t : tables) width += t.dim;
  return width;
}

int ModelSpec::interaction_width() const {
  switch (interaction) {
    case Interaction::kConcat:
    case Interaction::kLinear:  // the cross is folded into top_mlp[0]
      return concat_width();
    case Interaction::kDot: {
      const int z = z_width();
      const int n = static_cast<int>(tables.size()) + (z > 0 ? 1 : 0);
      return z + n * (n - 1) / 2;
    }
  }
  return 0;
}

absl::StatusOr<ModelSpec> ParseModelSpec(const std::string& yaml_text,
                                         const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid YAML: ", EscapeText(e.what())));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError("the model spec must be a YAML map (name:, tables:, ...)");
  }
  ModelSpec spec;
  Problems problems;
  try {
    Reader reader(&problems);
    ParseRoot(reader, root, base_dir, &spec);
  } catch (const YAML::Exception& e) {  // defensive: the Reader catches conversions
    problems.Add("spec", EscapeText(e.what()));
  }
  RETURN_IF_ERROR(problems.ToStatus());
  RETURN_IF_ERROR(ValidateModelSpec(spec));
  return spec;
}

absl::StatusOr<ModelSpec> ParseModelSpecFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxModelSpecBytes, "model spec");
  if (!text.ok()) return text.status();
  absl::StatusOr<ModelSpec> spec =
      ParseModelSpec(*text, std::filesystem::path(path).parent_path().string());
  if (!spec.ok()) return WithContext(spec.status(), path);
  return spec;
}

absl::Status ValidateModelSpec(const ModelSpec& spec) {
  Problems problems;
  CheckSpec(spec, problems);
  return problems.ToStatus();
}

std::string ModelSpecToYaml(const ModelSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << spec.name;
  out << YAML::Key << "version" << YAML::Value << YAML::DoubleQuoted << spec.version;
  out << YAML::Key << "weights" << YAML::Value << YAML::DoubleQuoted
      << std::filesystem::path(spec.weights_path).filename().string();
  out << YAML::Key << "embedding_dtype" << YAML::Value
      << std::string(DTypeName(spec.embedding_dtype));
  out << YAML::Key << "tables" << YAML::Value << YAML::BeginSeq;
  for (const TableSpec& t : spec.tables) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << t.name;
    out << YAML::Key << "side" << YAML::Value << (t.side == Side::kUser ? "user" : "item");
    out << YAML::Key << "rows" << YAML::Value << t.rows;
    out << YAML::Key << "dim" << YAML::Value << t.dim;
    out << YAML::Key << "pooling" << YAML::Value << (t.pooling == Pooling::kSum ? "sum" : "mean");
    out << YAML::Key << "oov" << YAML::Value << (t.oov == Oov::kModulo ? "modulo" : "reject");
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "dense" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "user" << YAML::Value << spec.dense_user;
  out << YAML::Key << "item" << YAML::Value << spec.dense_item;
  out << YAML::EndMap;
  out << YAML::Key << "bottom_mlp" << YAML::Value;
  EmitIntList(out, spec.bottom_mlp);
  out << YAML::Key << "interaction" << YAML::Value
      << std::string(InteractionName(spec.interaction));
  out << YAML::Key << "cross_dim" << YAML::Value << spec.cross_dim;
  out << YAML::Key << "top_mlp" << YAML::Value;
  EmitIntList(out, spec.top_mlp);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace fuserank::engine
