// Model spec YAML <-> ModelSpec. Parsing goes through the one YAML reader
// (engine/yaml_reader.h: types, enums, duplicate and unknown keys, no exception out); the
// ranges and cross-field rules live in ValidateModelSpec (engine/model_spec_checks.cc) so
// specs built in code get them too.
#include "engine/model_spec.h"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "engine/model_spec_checks.h"
#include "engine/regular_file.h"
#include "engine/status_macros.h"
#include "engine/yaml_reader.h"

namespace fuserank::engine {
namespace {

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

void EmitIntList(YAML::Emitter& out, const std::vector<int>& list) {
  out << YAML::Flow << YAML::BeginSeq;
  for (int v : list) out << v;
  out << YAML::EndSeq;
}

}  // namespace

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
  CheckModelSpec(spec, problems);
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
