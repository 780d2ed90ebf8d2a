// fuserank-gen-model: writes a seeded synthetic model (spec YAML + safetensors) of any
// shape. Weights are deterministic for a given --seed and tensor name, and are streamed
// to disk in chunks, so a multi-GB model needs only a few MB of memory
// (tools/gen_model_weights.h). Both outputs are checked before anything is written (not
// a folder, replaceable, room for the weights) and replaced once both are whole (Run()).
#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "engine/cpu/cpu_dtype.h"
#include "engine/model_spec.h"
#include "engine/status_macros.h"
#include "tools/cli/flags.h"
#include "tools/cli/output_file.h"
#include "tools/gen_model_weights.h"

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
ABSL_FLAG(uint64_t, max_weights_bytes, uint64_t{1} << 40,
          "refuse a model whose weights file would be larger than this (default 1 TiB); a "
          "model larger than the free space of --out's file system is refused too");

namespace fuserank::engine {
namespace {

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

std::string HumanBytes(uint64_t bytes) {
  return absl::StrFormat("%.1f GiB (%u bytes)", static_cast<double>(bytes) / (1 << 30), bytes);
}

// Before anything is written: both outputs can be replaced (neither a folder nor a file
// that cannot be written), the weights are within --max_weights_bytes and fit the free
// space of the file system that will hold them.
absl::Status CheckOutputs(const ModelSpec& spec, const std::filesystem::path& out,
                          uint64_t weights_bytes) {
  RETURN_IF_ERROR(WithContext(cli::CheckReplaceable(out.string()), "--out"));
  RETURN_IF_ERROR(WithContext(cli::CheckReplaceable(spec.weights_path), "--out's weights"));
  const uint64_t max_bytes = absl::GetFlag(FLAGS_max_weights_bytes);
  if (weights_bytes > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the weights would take ",
                                                   HumanBytes(weights_bytes),
                                                   ", over --max_weights_bytes=", max_bytes));
  }
  // The folder of --out, or the nearest one above it that exists (it will be created).
  std::filesystem::path folder = out.parent_path().empty() ? "." : out.parent_path();
  std::error_code ec;
  while (!std::filesystem::exists(folder, ec) && folder.has_parent_path() &&
         folder.parent_path() != folder) {
    folder = folder.parent_path();
  }
  struct statvfs fs {};
  if (::statvfs(folder.c_str(), &fs) == 0) {
    const unsigned __int128 free_bytes = static_cast<unsigned __int128>(fs.f_bavail) * fs.f_frsize;
    if (weights_bytes > free_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the weights would take ", HumanBytes(weights_bytes), ", and ", folder.string(), " has ",
          HumanBytes(static_cast<uint64_t>(free_bytes)), " free"));
    }
  }
  return absl::OkStatus();
}

// Both files are written to temporaries beside them and renamed into place only once both
// are whole, the weights first, so that a spec on disk never names missing or half-written
// weights. Should the spec's rename fail, the old weights (kept under a hard link until
// then) are put back: a failure leaves the pair that was there, and no temporary file. The
// two renames are not one step: a crash between them can leave the new weights beside the
// old spec, with the old weights as NAME.safetensors.old-XXXXXX (cli::CommitPair).
absl::Status Run() {
  ASSIGN_OR_RETURN(ModelSpec spec, SpecFromFlags());
  const std::filesystem::path out(absl::GetFlag(FLAGS_out));
  const std::vector<tools::PlannedTensor> plan = tools::PlanWeights(spec);
  const uint64_t weights_bytes = tools::WeightsFileBytes(plan);
  RETURN_IF_ERROR(CheckOutputs(spec, out, weights_bytes));
  std::error_code ec;
  if (out.has_parent_path() && !std::filesystem::is_directory(out.parent_path(), ec)) {
    std::filesystem::create_directories(out.parent_path(), ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("--out: cannot create the folder ",
                                              out.parent_path().string(), ": ", ec.message()));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<cli::OutputFile> yaml, cli::OutputFile::Create(out.string()));
  RETURN_IF_ERROR(
      yaml->Append(absl::StrCat("# Generated by fuserank-gen-model (seed ",
                                absl::GetFlag(FLAGS_seed), ").\n", ModelSpecToYaml(spec))));
  RETURN_IF_ERROR(yaml->Close());
  // The SafetensorsWriter writes its own file and renames it onto the temporary's name.
  ASSIGN_OR_RETURN(std::unique_ptr<cli::PendingFile> weights,
                   cli::PendingFile::Create(spec.weights_path));
  RETURN_IF_ERROR(tools::WriteWeights(plan, absl::GetFlag(FLAGS_seed), weights->temp()));
  RETURN_IF_ERROR(cli::CommitPair(*weights, yaml->pending()));
  std::printf("wrote %s and %s (%ju bytes)\n", out.string().c_str(), spec.weights_path.c_str(),
              static_cast<uintmax_t>(std::filesystem::file_size(spec.weights_path, ec)));
  return absl::OkStatus();
}

}  // namespace
}  // namespace fuserank::engine

int main(int argc, char** argv) {
  fuserank::cli::ParseFlagsOrExit(
      argc, argv, "fuserank-gen-model",
      "writes a seeded synthetic model: fuserank-gen-model --out=DIR/NAME.yaml [flags]",
      {"tools/gen_model.cc"});
  absl::Status status = fuserank::engine::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "fuserank-gen-model: %s\n", std::string(status.message()).c_str());
    // 2: what the flags asked cannot be done (a bad value, an --out that cannot be
    // replaced, a model too large); 1: writing failed.
    const absl::StatusCode code = status.code();
    return code == absl::StatusCode::kInvalidArgument ||
                   code == absl::StatusCode::kResourceExhausted
               ? 2
               : 1;
  }
  return 0;
}
