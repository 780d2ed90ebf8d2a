// Model spec YAML <-> ModelSpec. Parsing goes through the one YAML reader
// (engine/yaml_reader.h: types, enums, duplicate and unknown keys, no exception out); the
// ranges and cross-field rules live in ValidateModelSpec so specs built in code get them too.
#include "engine/model_spec.h"

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
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
#include "engine/yaml_reader.h"

namespace fuserank::engine {
namespace {

constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max();  // 2^31 - 1
constexpr int64_t kMaxWidth = int64_t{1} << 20;       // any one dim, dense count or layer width
constexpr int64_t kMaxTotalWidth = int64_t{1} << 24;  // concat(V) and the interaction output
constexpr size_t kMaxNameBytes = 256;                 // name, version, table names
constexpr size_t kQuoted = 64;  // bytes of a spec value quoted back in a message

// Problems of a spec are joined on one line: they travel in statuses and log lines.
constexpr absl::string_view kSeparator = "; ";

void ParseTable(const YAML::Node& node, size_t index, ErrorList* errors, TableSpec* t) {
  const std::string p = absl::StrCat("tables[", index, "]");
  if (!node.IsMap()) {
    errors->Add(p, "must be a map like {name: user_id, side: user, rows: 1000, dim: 16}");
    return;
  }
  YamlMap m(node, p, errors);
  m.Require({"name", "side", "dim"});
  m.String("name", &t->name);
  m.Enum<Side>("side", {{"user", Side::kUser}, {"item", Side::kItem}}, &t->side, " | ");
  m.Int64("rows", &t->rows);
  m.Int("dim", &t->dim);
  m.Enum<Pooling>("pooling", {{"sum", Pooling::kSum}, {"mean", Pooling::kMean}}, &t->pooling,
                  " | ");
  m.Enum<Oov>("oov", {{"modulo", Oov::kModulo}, {"reject", Oov::kReject}}, &t->oov, " | ");
  m.Enum<Storage>("storage", {{"local", Storage::kLocal}, {"redis", Storage::kRedis}}, &t->storage,
                  " | ");
  if (t->storage == Storage::kLocal && !node["rows"]) {
    errors->Add(p + ".rows", "required (a local table's row count)");
  }
  if (t->storage == Storage::kRedis && (node["rows"] || node["oov"])) {
    errors->Add(p, "a storage: redis table is addressed by the raw id: it takes no rows or oov");
  }
  m.ReportUnknown();
}

void ParseDense(YamlMap& r, ModelSpec* spec) {
  std::optional<YAML::Node> dense = r.Find("dense");
  if (!dense) return;
  if (!dense->IsMap()) {
    r.errors()->Add("dense", "must be a map like {user: 4, item: 3}");
    return;
  }
  YamlMap m(*dense, "dense", r.errors());
  m.Int("user", &spec->dense_user);
  m.Int("item", &spec->dense_item);
  m.ReportUnknown();
}

void ParseDcn(YamlMap& r, ModelSpec* spec) {
  std::optional<YAML::Node> dcn = r.Find("dcn");
  if (!dcn) return;
  if (!dcn->IsMap()) {
    r.errors()->Add("dcn", "must be a map like {layers: 3, low_rank: 512}");
    return;
  }
  YamlMap m(*dcn, "dcn", r.errors());
  m.Require({"layers"});
  m.Int("layers", &spec->dcn.layers);
  m.Int("low_rank", &spec->dcn.low_rank);
  m.ReportUnknown();
}

void ParseRoot(YamlMap& r, const std::string& base_dir, ModelSpec* spec) {
  ErrorList* errors = r.errors();
  r.Require({"name", "weights", "interaction", "top_mlp"});
  r.String("name", &spec->name);
  spec->version = "1";
  r.String("version", &spec->version);
  std::string weights;
  if (r.String("weights", &weights)) {
    if (weights.empty()) {
      errors->Add("weights", "must name the safetensors file");
    } else {
      std::filesystem::path path(weights);
      spec->weights_path =
          path.is_absolute() ? weights : (std::filesystem::path(base_dir) / path).string();
    }
  }
  r.Enum<DType>("embedding_dtype",
                {{"fp32", DType::kF32},
                 {"fp16", DType::kF16},
                 {"bf16", DType::kBF16},
                 {"int8", DType::kInt8}},
                &spec->embedding_dtype, " | ");
  if (std::optional<YAML::Node> tables = r.Find("tables")) {
    if (!tables->IsSequence()) {
      errors->Add("tables", "must be a list of tables");
    } else {
      spec->tables.resize(tables->size());
      for (size_t i = 0; i < tables->size(); ++i) {
        ParseTable((*tables)[i], i, errors, &spec->tables[i]);
      }
    }
  }
  ParseDense(r, spec);
  r.IntList("bottom_mlp", &spec->bottom_mlp, "[64, 16]");
  r.Enum<Interaction>("interaction",
                      {{"concat", Interaction::kConcat},
                       {"dot", Interaction::kDot},
                       {"linear", Interaction::kLinear},
                       {"dcn", Interaction::kDcn}},
                      &spec->interaction, " | ");
  r.Int("cross_dim", &spec->cross_dim);
  ParseDcn(r, spec);
  r.IntList("top_mlp", &spec->top_mlp, "[64, 32, 1]");
  r.ReportUnknown();
}

// Names travel into messages, logs and metric labels: printable UTF-8 of bounded length.
void CheckName(ErrorList& problems, absl::string_view field, const std::string& name) {
  if (name.size() > kMaxNameBytes) {
    problems.Add(field,
                 absl::StrCat("must be at most ", kMaxNameBytes, " bytes, got ", name.size()));
  } else if (!IsPrintableUtf8(name)) {
    problems.Add(field, absl::StrCat("must be printable UTF-8 without control characters, got '",
                                     EscapeText(name, kQuoted), "'"));
  }
}

void CheckWidth(ErrorList& problems, absl::string_view field, int64_t value, int64_t min) {
  if (value < min || value > kMaxWidth) {
    problems.Add(field, absl::StrCat("must be in ", min, "..", kMaxWidth, ", got ", value));
  }
}

// dcn.layers and dcn.low_rank: required ranges with interaction dcn, absent otherwise.
void CheckDcn(const ModelSpec& spec, ErrorList& problems) {
  if (spec.interaction != Interaction::kDcn) {
    if (spec.dcn.layers != 0 || spec.dcn.low_rank != 0) {
      problems.Add("dcn", absl::StrCat("must be absent unless interaction is dcn, got {layers: ",
                                       spec.dcn.layers, ", low_rank: ", spec.dcn.low_rank, "}"));
    }
    return;
  }
  if (spec.dcn.layers == 0 && spec.dcn.low_rank == 0) {
    problems.Add("dcn", "must be given with interaction: dcn, e.g. {layers: 3, low_rank: 512}");
    return;
  }
  if (spec.dcn.layers < 1 || spec.dcn.layers > kMaxDcnLayers) {
    problems.Add("dcn.layers", absl::StrCat("must be in 1..", kMaxDcnLayers,
                                            " with interaction: dcn, got ", spec.dcn.layers));
  }
  CheckWidth(problems, "dcn.low_rank", spec.dcn.low_rank, 0);
}

// Every range and cross-field rule of SPEC section 2, each problem named by its field.
void CheckSpec(const ModelSpec& spec, ErrorList& problems) {
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
    if (t.remote()) {
      if (t.rows != 0) problems.Add(p + ".rows", "a storage: redis table has no row count");
    } else if (t.rows < 1 || t.rows > kMaxRows) {
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
  CheckDcn(spec, problems);
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
    case Interaction::kDcn:
      return "dcn";
  }
  return "?";
}

bool ModelSpec::has_remote_tables() const {
  for (const TableSpec& t : tables) {
    if (t.remote()) return true;
  }
  return false;
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
    case Interaction::kDcn:     // x_L is as wide as x0 = concat(V)
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
  ErrorList errors;
  std::optional<YAML::Node> root = LoadYaml(yaml_text, &errors);
  if (!root) return errors.ToStatus(kSeparator);
  if (!root->IsMap()) {
    return absl::InvalidArgumentError("the model spec must be a YAML map (name:, tables:, ...)");
  }
  ModelSpec spec;
  YamlMap reader(*root, "", &errors);
  ParseRoot(reader, base_dir, &spec);
  RETURN_IF_ERROR(errors.ToStatus(kSeparator));
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
  ErrorList problems;
  CheckSpec(spec, problems);
  return problems.ToStatus(kSeparator);
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
    if (!t.remote()) out << YAML::Key << "rows" << YAML::Value << t.rows;
    out << YAML::Key << "dim" << YAML::Value << t.dim;
    out << YAML::Key << "pooling" << YAML::Value << (t.pooling == Pooling::kSum ? "sum" : "mean");
    if (t.remote()) {
      out << YAML::Key << "storage" << YAML::Value << "redis";
    } else {
      out << YAML::Key << "oov" << YAML::Value << (t.oov == Oov::kModulo ? "modulo" : "reject");
    }
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
  if (spec.interaction == Interaction::kDcn) {
    out << YAML::Key << "dcn" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "layers" << YAML::Value << spec.dcn.layers;
    out << YAML::Key << "low_rank" << YAML::Value << spec.dcn.low_rank;
    out << YAML::EndMap;
  }
  out << YAML::Key << "top_mlp" << YAML::Value;
  EmitIntList(out, spec.top_mlp);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace fuserank::engine
