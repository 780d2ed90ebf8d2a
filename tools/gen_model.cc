// fuserank-gen-model: writes a seeded synthetic model (spec YAML + safetensors) of any
// shape. Weights are deterministic for a given --seed and tensor name, and are streamed
// to disk in chunks, so a multi-GB model needs only a few MB of memory.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "engine/cpu/cpu_dtype.h"
#include "engine/model_spec.h"
#include "engine/safetensors.h"
#include "engine/status_macros.h"

ABSL_FLAG(std::string, out, "", "spec to write, DIR/NAME.yaml; weights go to DIR/NAME.safetensors");
ABSL_FLAG(std::string, name, "", "model name (default: NAME of --out)");
ABSL_FLAG(std::string, version, "1", "model version string");
ABSL_FLAG(uint64_t, seed, 1, "random seed; the same seed gives the same weights");
ABSL_FLAG(int, user_tables, 1, "user-side tables, named user_0, user_1, ...");
ABSL_FLAG(int, item_tables, 1, "item-side tables, named item_0, item_1, ...");
ABSL_FLAG(std::string, rows, "1000",
          "rows per table: one count for every table, or a comma list (user tables first)");
ABSL_FLAG(int, dim, 16, "embedding width of every table");
ABSL_FLAG(int, dense_user, 0, "user dense features");
ABSL_FLAG(int, dense_item, 0, "item dense features");
ABSL_FLAG(std::string, bottom_mlp, "", "bottom MLP widths, e.g. 64,16 (empty: none)");
ABSL_FLAG(std::string, interaction, "dot", "concat | dot | linear | dcn");
ABSL_FLAG(int, cross_dim, 0, "width of the linear cross (interaction=linear only)");
ABSL_FLAG(int, dcn_layers, 0, "cross layers of interaction=dcn");
ABSL_FLAG(int, dcn_low_rank, 0, "rank of each dcn layer (0: full rank)");
ABSL_FLAG(std::string, preset, "",
          "a fixed model shape instead of the shape flags: demo (the example of SPEC section "
          "2: user_id 100000 rows and item_id 500000 rows of dim 16, dense 4 user and 3 item, "
          "bottom 64-16, dot, top 64-32-1) or dlrm_v2 (MLPerf DLRM-v2: 26 item tables of dim "
          "128, rows scaled by --row_scale, 13 item dense features, bottom 512-256-128, DCNv2 "
          "3 layers of rank 512, top 1024-1024-512-256-1)");
ABSL_FLAG(double, row_scale, 0.01,
          "--preset=dlrm_v2 only: each table's row count times this, rounded up, but never below "
          "1024 rows or the table's own count if smaller (MLPerf's 40M-row tables become "
          "400k at 0.01)");
ABSL_FLAG(std::string, top_mlp, "64,32,1", "top MLP widths, the last one 1");
ABSL_FLAG(std::string, dtype, "fp32", "embedding dtype: fp32 | fp16 | bf16");
ABSL_FLAG(std::string, pooling, "sum", "pooling of every table: sum | mean");
ABSL_FLAG(std::string, oov, "modulo", "out-of-range ids in every table: modulo | reject");

namespace fuserank::engine {
namespace {

// SplitMix64: tiny, fast, and identical on every platform (std distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float Uniform() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }  // [0,1)

 private:
  uint64_t state_;
};

uint64_t TensorSeed(uint64_t seed, absl::string_view name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return Rng(seed ^ h).Next();
}

absl::Status ParseIntList(absl::string_view flag, absl::string_view text,
                          std::vector<int64_t>* out) {
  out->clear();
  if (text.empty()) return absl::OkStatus();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", part, "' is not an integer (want e.g. 64,32,1)"));
    }
    out->push_back(v);
  }
  return absl::OkStatus();
}

template <typename E>
absl::Status ParseChoice(absl::string_view flag, absl::string_view text,
                         std::initializer_list<std::pair<absl::string_view, E>> choices, E* out) {
  std::string names;
  for (const auto& [name, value] : choices) {
    if (text == name) {
      *out = value;
      return absl::OkStatus();
    }
    absl::StrAppend(&names, names.empty() ? "" : " | ", name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": want ", names, ", got '", text, "'"));
}

absl::Status ToInts(absl::string_view flag, const std::vector<int64_t>& in, std::vector<int>* out) {
  for (int64_t v : in) {
    if (v < 1 || v > (1 << 20)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": widths must be in 1..2^20"));
    }
    out->push_back(static_cast<int>(v));
  }
  return absl::OkStatus();
}

// MLPerf Inference DLRM-v2 (Criteo 1TB multi-hot): rows of its 26 tables.
constexpr int64_t kDlrmV2Rows[26] = {
    40000000, 39060,    17295,    7424,     20265,  3,     7122, 1543, 63,
    40000000, 3067956,  405282,   10,       2209,   11938, 155,  4,    976,
    14,       40000000, 40000000, 40000000, 590152, 12973, 108,  36};

// A scaled table keeps at least this many rows (or all of its own, if it has fewer).
constexpr int64_t kMinScaledRows = 1024;

// Every sample of DLRM-v2 is a candidate here: all tables and dense features item-side.
absl::Status ApplyDlrmV2(double row_scale, ModelSpec* spec) {
  if (!(row_scale > 0 && row_scale <= 1)) {
    return absl::InvalidArgumentError("--row_scale: want a number in (0, 1]");
  }
  for (int i = 0; i < 26; ++i) {
    spec->tables.push_back(
        TableSpec{.name = absl::StrCat("cat_", i),
                  .side = Side::kItem,
                  .rows = std::max(static_cast<int64_t>(std::ceil(kDlrmV2Rows[i] * row_scale)),
                                   std::min<int64_t>(kDlrmV2Rows[i], kMinScaledRows)),
                  .dim = 128});
  }
  spec->dense_item = 13;
  spec->bottom_mlp = {512, 256, 128};
  spec->interaction = Interaction::kDcn;
  spec->dcn = {3, 512};
  spec->top_mlp = {1024, 1024, 512, 256, 1};
  return absl::OkStatus();
}

// The example model of SPEC section 2, which the build generates as the demo model.
void ApplyDemo(ModelSpec* spec) {
  spec->tables.push_back(
      TableSpec{.name = "user_id", .side = Side::kUser, .rows = 100000, .dim = 16});
  spec->tables.push_back(
      TableSpec{.name = "item_id", .side = Side::kItem, .rows = 500000, .dim = 16});
  spec->dense_user = 4;
  spec->dense_item = 3;
  spec->bottom_mlp = {64, 16};
  spec->interaction = Interaction::kDot;
  spec->top_mlp = {64, 32, 1};
}

// A shape flag given beside --preset would be ignored: refuse it instead.
absl::Status CheckNoShapeFlags() {
  std::vector<std::string> given;
  if (absl::GetFlag(FLAGS_user_tables) != 1) given.push_back("user_tables");
  if (absl::GetFlag(FLAGS_item_tables) != 1) given.push_back("item_tables");
  if (absl::GetFlag(FLAGS_rows) != "1000") given.push_back("rows");
  if (absl::GetFlag(FLAGS_dim) != 16) given.push_back("dim");
  if (absl::GetFlag(FLAGS_dense_user) != 0) given.push_back("dense_user");
  if (absl::GetFlag(FLAGS_dense_item) != 0) given.push_back("dense_item");
  if (!absl::GetFlag(FLAGS_bottom_mlp).empty()) given.push_back("bottom_mlp");
  if (absl::GetFlag(FLAGS_interaction) != "dot") given.push_back("interaction");
  if (absl::GetFlag(FLAGS_cross_dim) != 0) given.push_back("cross_dim");
  if (absl::GetFlag(FLAGS_dcn_layers) != 0) given.push_back("dcn_layers");
  if (absl::GetFlag(FLAGS_dcn_low_rank) != 0) given.push_back("dcn_low_rank");
  if (absl::GetFlag(FLAGS_top_mlp) != "64,32,1") given.push_back("top_mlp");
  if (absl::GetFlag(FLAGS_pooling) != "sum") given.push_back("pooling");
  if (absl::GetFlag(FLAGS_oov) != "modulo") given.push_back("oov");
  if (given.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--preset sets the model's shape; drop --", absl::StrJoin(given, ", --")));
}

absl::StatusOr<ModelSpec> SpecFromFlags() {
  ModelSpec spec;
  const std::filesystem::path out(absl::GetFlag(FLAGS_out));
  if (out.empty() || out.filename().empty()) {
    return absl::InvalidArgumentError("--out is required, e.g. --out=config/models/demo.yaml");
  }
  // The weights go to NAME.safetensors beside the spec: any other --out could name them
  // (--out=m.safetensors wrote the spec over its own weights).
  if (out.extension() != ".yaml" && out.extension() != ".yml") {
    return absl::InvalidArgumentError(
        absl::StrCat("--out=", out.string(), ": must name the spec, DIR/NAME.yaml (the weights go ",
                     "to DIR/NAME.safetensors beside it)"));
  }
  spec.name = absl::GetFlag(FLAGS_name).empty() ? out.stem().string() : absl::GetFlag(FLAGS_name);
  spec.version = absl::GetFlag(FLAGS_version);
  spec.weights_path = (out.parent_path() / (out.stem().string() + ".safetensors")).string();
  RETURN_IF_ERROR(
      ParseChoice<DType>("dtype", absl::GetFlag(FLAGS_dtype),
                         {{"fp32", DType::kF32}, {"fp16", DType::kF16}, {"bf16", DType::kBF16}},
                         &spec.embedding_dtype));
  Pooling pooling = Pooling::kSum;
  if (!absl::GetFlag(FLAGS_preset).empty()) {
    const std::string& preset = absl::GetFlag(FLAGS_preset);
    if (preset != "dlrm_v2" && preset != "demo") {
      return absl::InvalidArgumentError(
          absl::StrCat("--preset: want demo or dlrm_v2, got '", preset, "'"));
    }
    RETURN_IF_ERROR(CheckNoShapeFlags());
    if (preset == "demo") {
      if (absl::GetFlag(FLAGS_row_scale) != 0.01) {
        return absl::InvalidArgumentError("--row_scale: only with --preset=dlrm_v2");
      }
      ApplyDemo(&spec);
    } else {
      RETURN_IF_ERROR(ApplyDlrmV2(absl::GetFlag(FLAGS_row_scale), &spec));
    }
    RETURN_IF_ERROR(WithContext(ValidateModelSpec(spec), "the preset is invalid"));
    return spec;
  }
  if (absl::GetFlag(FLAGS_row_scale) != 0.01) {
    return absl::InvalidArgumentError("--row_scale: only with --preset (scale --rows instead)");
  }
  RETURN_IF_ERROR(ParseChoice<Pooling>("pooling", absl::GetFlag(FLAGS_pooling),
                                       {{"sum", Pooling::kSum}, {"mean", Pooling::kMean}},
                                       &pooling));
  Oov oov = Oov::kModulo;
  RETURN_IF_ERROR(ParseChoice<Oov>("oov", absl::GetFlag(FLAGS_oov),
                                   {{"modulo", Oov::kModulo}, {"reject", Oov::kReject}}, &oov));
  RETURN_IF_ERROR(ParseChoice<Interaction>("interaction", absl::GetFlag(FLAGS_interaction),
                                           {{"concat", Interaction::kConcat},
                                            {"dot", Interaction::kDot},
                                            {"linear", Interaction::kLinear},
                                            {"dcn", Interaction::kDcn}},
                                           &spec.interaction));
  const int users = absl::GetFlag(FLAGS_user_tables), items = absl::GetFlag(FLAGS_item_tables);
  if (users < 0 || items < 0 || users + items > 4096) {
    return absl::InvalidArgumentError("--user_tables, --item_tables: want 0..4096 tables in all");
  }
  std::vector<int64_t> rows;
  RETURN_IF_ERROR(ParseIntList("rows", absl::GetFlag(FLAGS_rows), &rows));
  if (rows.size() == 1) rows.assign(users + items, rows[0]);
  if (rows.size() != static_cast<size_t>(users + items)) {
    return absl::InvalidArgumentError(absl::StrCat("--rows: want one count or ", users + items,
                                                   " (user tables first), got ", rows.size()));
  }
  for (int i = 0; i < users + items; ++i) {
    const bool user = i < users;
    spec.tables.push_back(
        TableSpec{.name = absl::StrCat(user ? "user_" : "item_", user ? i : i - users),
                  .side = user ? Side::kUser : Side::kItem,
                  .rows = rows[i],
                  .dim = absl::GetFlag(FLAGS_dim),
                  .pooling = pooling,
                  .oov = oov});
  }
  spec.dense_user = absl::GetFlag(FLAGS_dense_user);
  spec.dense_item = absl::GetFlag(FLAGS_dense_item);
  spec.cross_dim = absl::GetFlag(FLAGS_cross_dim);
  spec.dcn = {absl::GetFlag(FLAGS_dcn_layers), absl::GetFlag(FLAGS_dcn_low_rank)};
  std::vector<int64_t> widths;
  RETURN_IF_ERROR(ParseIntList("bottom_mlp", absl::GetFlag(FLAGS_bottom_mlp), &widths));
  RETURN_IF_ERROR(ToInts("bottom_mlp", widths, &spec.bottom_mlp));
  RETURN_IF_ERROR(ParseIntList("top_mlp", absl::GetFlag(FLAGS_top_mlp), &widths));
  RETURN_IF_ERROR(ToInts("top_mlp", widths, &spec.top_mlp));
  RETURN_IF_ERROR(WithContext(ValidateModelSpec(spec), "the flags describe an invalid model"));
  return spec;
}

struct Planned {
  SafetensorsWriter::Entry entry;
  float bound = 0;     // uniform in [-bound, bound] (layers)
  bool table = false;  // else: triangular ("normal-ish") with std 1/sqrt(dim)
};

std::vector<Planned> Plan(const ModelSpec& spec) {
  std::vector<Planned> plan;  // float32 layers first, then the (maybe 2-byte) tables
  auto layer = [&](const std::string& prefix, int64_t in, int64_t out) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    plan.push_back({{prefix + ".weight", "F32", {out, in}}, bound});
    plan.push_back({{prefix + ".bias", "F32", {out}}, bound});
  };
  int in = spec.dense_total();
  for (size_t i = 0; i < spec.bottom_mlp.size(); ++i) {
    layer(absl::StrCat("bottom_mlp.", i), in, spec.bottom_mlp[i]);
    in = spec.bottom_mlp[i];
  }
  in = spec.interaction_width();
  if (spec.interaction == Interaction::kLinear) {
    layer("cross", spec.concat_width(), spec.cross_dim);
    in = spec.cross_dim;
  }
  // dcn: weights ~ U(+-1/(2 sqrt(fan_in))) so that x_l stays the size of x0 over the layers.
  const int64_t d0 = spec.concat_width(), rank = spec.dcn.low_rank;
  for (int l = 0; l < spec.dcn.layers; ++l) {
    const std::string p = absl::StrCat("dcn.", l);
    if (rank > 0) {
      plan.push_back({{p + ".V.weight", "F32", {rank, d0}}, 0.5f / std::sqrt(float(d0))});
      plan.push_back({{p + ".U.weight", "F32", {d0, rank}}, 0.5f / std::sqrt(float(rank))});
    } else {
      plan.push_back({{p + ".W.weight", "F32", {d0, d0}}, 0.5f / std::sqrt(float(d0))});
    }
    plan.push_back({{p + ".bias", "F32", {d0}}, 0.1f});
  }
  for (size_t i = 0; i < spec.top_mlp.size(); ++i) {
    layer(absl::StrCat("top_mlp.", i), in, spec.top_mlp[i]);
    in = spec.top_mlp[i];
  }
  const std::string dtype(SafetensorsDType(spec.embedding_dtype));
  for (const TableSpec& t : spec.tables) {
    plan.push_back({{absl::StrCat("embeddings.", t.name, ".weight"), dtype, {t.rows, t.dim}},
                    std::sqrt(6.0f / t.dim) / 2,
                    true});
  }
  return plan;
}

// Streams one tensor's values, generated and encoded a chunk at a time.
absl::Status WriteTensor(const Planned& p, uint64_t seed, SafetensorsWriter* writer) {
  Rng rng(TensorSeed(seed, p.entry.name));
  uint64_t remaining = 1;
  for (int64_t d : p.entry.shape) remaining *= d;
  constexpr size_t kChunk = 1 << 20;
  std::vector<float> values(kChunk);
  std::vector<uint16_t> halves(p.entry.dtype == "F32" ? 0 : kChunk);
  while (remaining > 0) {
    const size_t n = std::min<uint64_t>(kChunk, remaining);
    for (size_t i = 0; i < n; ++i) {
      values[i] = p.table ? (rng.Uniform() + rng.Uniform() - 1.0f) * 2 * p.bound
                          : (2 * rng.Uniform() - 1.0f) * p.bound;
    }
    if (p.entry.dtype == "F32") {
      RETURN_IF_ERROR(writer->Append(values.data(), n * sizeof(float)));
    } else {
      const bool f16 = p.entry.dtype == "F16";
      for (size_t i = 0; i < n; ++i) {
        halves[i] = f16 ? FloatToHalf(values[i]) : FloatToBFloat16(values[i]);
      }
      RETURN_IF_ERROR(writer->Append(halves.data(), n * sizeof(uint16_t)));
    }
    remaining -= n;
  }
  return absl::OkStatus();
}

absl::Status Run() {
  ASSIGN_OR_RETURN(ModelSpec spec, SpecFromFlags());
  const std::filesystem::path out(absl::GetFlag(FLAGS_out));
  std::error_code ec;
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path(), ec);
  const std::vector<Planned> plan = Plan(spec);
  std::vector<SafetensorsWriter::Entry> entries;
  for (const Planned& p : plan) entries.push_back(p.entry);
  ASSIGN_OR_RETURN(auto writer,
                   SafetensorsWriter::Create(spec.weights_path, std::move(entries),
                                             {{"format", "pt"},
                                              {"generator", "fuserank-gen-model"},
                                              {"seed", absl::StrCat(absl::GetFlag(FLAGS_seed))}}));
  for (const Planned& p : plan)
    RETURN_IF_ERROR(WriteTensor(p, absl::GetFlag(FLAGS_seed), writer.get()));
  RETURN_IF_ERROR(writer->Close());
  // The spec last, so a spec on disk never names weights that are not there yet.
  const std::string tmp = out.string() + ".tmp";
  {
    std::ofstream yaml(tmp, std::ios::binary | std::ios::trunc);
    yaml << "# Generated by fuserank-gen-model (seed " << absl::GetFlag(FLAGS_seed) << ").\n"
         << ModelSpecToYaml(spec);
    if (!yaml.flush()) return absl::InternalError(absl::StrCat(tmp, ": write failed"));
  }
  std::filesystem::rename(tmp, out, ec);
  if (ec) return absl::InternalError(absl::StrCat(out.string(), ": ", ec.message()));
  std::printf("wrote %s and %s (%ju bytes)\n", out.string().c_str(), spec.weights_path.c_str(),
              static_cast<uintmax_t>(std::filesystem::file_size(spec.weights_path, ec)));
  return absl::OkStatus();
}

}  // namespace
}  // namespace fuserank::engine

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "writes a seeded synthetic model: fuserank-gen-model --out=DIR/NAME.yaml [flags]");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "fuserank-gen-model: unexpected argument '%s'\n", rest[1]);
    return 2;
  }
  absl::Status status = fuserank::engine::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "fuserank-gen-model: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
