// Model spec parsing and validation: good specs, every bad field named with its file,
// the width rules of SPEC section 2, and a YAML round trip.
#include "engine/model_spec.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

using ::testing::HasSubstr;

constexpr char kGoodSpec[] = R"(name: demo
version: "7"
weights: demo.safetensors
embedding_dtype: fp16
tables:
  - {name: user_id,  side: user, rows: 100000, dim: 16, pooling: mean}
  - {name: item_id,  side: item, rows: 500000, dim: 16, pooling: sum, oov: reject}
dense: {user: 4, item: 3}
bottom_mlp: [64, 16]
interaction: dot
cross_dim: 0
top_mlp: [64, 32, 1]
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << "test bug: '" << from << "' not in the spec";
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

void ExpectSameSpec(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.weights_path, b.weights_path);
  EXPECT_EQ(a.embedding_dtype, b.embedding_dtype);
  ASSERT_EQ(a.tables.size(), b.tables.size());
  for (size_t i = 0; i < a.tables.size(); ++i) {
    EXPECT_EQ(a.tables[i].name, b.tables[i].name);
    EXPECT_EQ(a.tables[i].side, b.tables[i].side);
    EXPECT_EQ(a.tables[i].rows, b.tables[i].rows);
    EXPECT_EQ(a.tables[i].dim, b.tables[i].dim);
    EXPECT_EQ(a.tables[i].pooling, b.tables[i].pooling);
    EXPECT_EQ(a.tables[i].oov, b.tables[i].oov);
  }
  EXPECT_EQ(a.dense_user, b.dense_user);
  EXPECT_EQ(a.dense_item, b.dense_item);
  EXPECT_EQ(a.bottom_mlp, b.bottom_mlp);
  EXPECT_EQ(a.interaction, b.interaction);
  EXPECT_EQ(a.cross_dim, b.cross_dim);
  EXPECT_EQ(a.dcn.layers, b.dcn.layers);
  EXPECT_EQ(a.dcn.low_rank, b.dcn.low_rank);
  EXPECT_EQ(a.top_mlp, b.top_mlp);
}

TEST(ModelSpecTest, ParsesEveryField) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(kGoodSpec, "models");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "demo");
  EXPECT_EQ(spec->version, "7");
  EXPECT_EQ(spec->weights_path, "models/demo.safetensors");
  EXPECT_EQ(spec->embedding_dtype, DType::kF16);
  ASSERT_EQ(spec->tables.size(), 2u);
  EXPECT_EQ(spec->tables[0].name, "user_id");
  EXPECT_EQ(spec->tables[0].side, Side::kUser);
  EXPECT_EQ(spec->tables[0].rows, 100000);
  EXPECT_EQ(spec->tables[0].pooling, Pooling::kMean);
  EXPECT_EQ(spec->tables[0].oov, Oov::kModulo);
  EXPECT_EQ(spec->tables[1].side, Side::kItem);
  EXPECT_EQ(spec->tables[1].rows, 500000);
  EXPECT_EQ(spec->tables[1].oov, Oov::kReject);
  EXPECT_EQ(spec->dense_user, 4);
  EXPECT_EQ(spec->dense_item, 3);
  EXPECT_EQ(spec->bottom_mlp, (std::vector<int>{64, 16}));
  EXPECT_EQ(spec->interaction, Interaction::kDot);
  EXPECT_EQ(spec->top_mlp, (std::vector<int>{64, 32, 1}));
  EXPECT_EQ(spec->z_width(), 16);
  EXPECT_EQ(spec->concat_width(), 48);
  EXPECT_EQ(spec->interaction_width(), 16 + 3);  // z + 3 choose 2 dots
}

TEST(ModelSpecTest, AppliesDefaults) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(R"(name: m
weights: /abs/m.safetensors
tables: [{name: a, side: item, rows: 10, dim: 4}]
interaction: concat
top_mlp: [1]
)",
                                                  "ignored");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->version, "1");
  EXPECT_EQ(spec->weights_path, "/abs/m.safetensors");  // absolute paths stay
  EXPECT_EQ(spec->embedding_dtype, DType::kF32);
  EXPECT_EQ(spec->tables[0].pooling, Pooling::kSum);
  EXPECT_EQ(spec->tables[0].oov, Oov::kModulo);
  EXPECT_EQ(spec->dense_total(), 0);
  EXPECT_TRUE(spec->bottom_mlp.empty());
  EXPECT_EQ(spec->cross_dim, 0);
  EXPECT_EQ(spec->z_width(), 0);
  EXPECT_EQ(spec->interaction_width(), 4);
}

TEST(ModelSpecTest, ParsesInt8ForLaterLayout) {
  absl::StatusOr<ModelSpec> spec =
      ParseModelSpec(Replace(kGoodSpec, "embedding_dtype: fp16", "embedding_dtype: int8"), "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->embedding_dtype, DType::kInt8);
  EXPECT_EQ(DTypeName(DType::kInt8), "int8");
}

TEST(ModelSpecTest, WidthsFollowSpecStepFour) {
  ModelSpec spec;
  spec.name = "w";
  spec.weights_path = "w.safetensors";
  spec.top_mlp = {1};
  spec.tables = {{"a", Side::kUser, 10, 8}, {"b", Side::kItem, 10, 8}, {"c", Side::kItem, 10, 8}};
  spec.interaction = Interaction::kDot;  // no dense: no z, dots only
  EXPECT_EQ(spec.z_width(), 0);
  EXPECT_EQ(spec.interaction_width(), 3);
  EXPECT_TRUE(ValidateModelSpec(spec).ok());
  spec.dense_user = 5;
  spec.dense_item = 3;  // dense without a bottom MLP: z = x, width 8
  EXPECT_EQ(spec.z_width(), 8);
  EXPECT_EQ(spec.interaction_width(), 8 + 6);
  EXPECT_TRUE(ValidateModelSpec(spec).ok());
  spec.interaction = Interaction::kConcat;
  EXPECT_EQ(spec.concat_width(), 8 + 24);
  EXPECT_EQ(spec.interaction_width(), 32);
  spec.interaction = Interaction::kLinear;
  spec.cross_dim = 12;  // folded: top_mlp[0] reads concat(V)
  EXPECT_EQ(spec.interaction_width(), 32);
  EXPECT_TRUE(ValidateModelSpec(spec).ok());
}

TEST(ModelSpecTest, ParsesDcnAndItsWidth) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(
      Replace(kGoodSpec, "interaction: dot", "interaction: dcn\ndcn: {layers: 3, low_rank: 5}"),
      "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->interaction, Interaction::kDcn);
  EXPECT_EQ(spec->dcn.layers, 3);
  EXPECT_EQ(spec->dcn.low_rank, 5);
  EXPECT_EQ(InteractionName(spec->interaction), "dcn");
  EXPECT_EQ(spec->interaction_width(), 16 + 16 + 16);  // x_L is as wide as concat(V)
  spec = ParseModelSpec(
      Replace(kGoodSpec, "interaction: dot", "interaction: dcn\ndcn: {layers: 2}"), "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dcn.low_rank, 0);  // the default: full-rank W_l
  const ModelSpec full = *spec;
  spec = ParseModelSpec(ModelSpecToYaml(full), "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ExpectSameSpec(full, *spec);
}

TEST(ModelSpecTest, RejectsDotOverOneVector) {
  ModelSpec spec;
  spec.name = "w";
  spec.weights_path = "w.safetensors";
  spec.top_mlp = {1};
  spec.tables = {{"a", Side::kUser, 10, 8}};
  spec.interaction = Interaction::kDot;
  absl::Status status = ValidateModelSpec(spec);
  EXPECT_THAT(status.message(), HasSubstr("interaction"));
}

TEST(ModelSpecTest, AcceptsAKServeSuffixThatNamesNoOtherTable) {
  absl::StatusOr<ModelSpec> spec =
      ParseModelSpec(Replace(kGoodSpec, "name: item_id", "name: item__lengths"), "");
  ASSERT_TRUE(spec.ok()) << spec.status();
}

TEST(ModelSpecTest, RoundTripsThroughYaml) {
  ModelSpec spec;
  spec.name = "round: trip \"quoted\"";
  spec.version = "2024-01";
  spec.weights_path = "some/dir/w.safetensors";
  spec.embedding_dtype = DType::kBF16;
  spec.tables = {{"true", Side::kUser, 2147483647, 4, Pooling::kMean, Oov::kReject},
                 {"123", Side::kItem, 1, 4, Pooling::kSum, Oov::kModulo}};
  spec.dense_user = 0;
  spec.dense_item = 2;
  spec.interaction = Interaction::kLinear;
  spec.cross_dim = 7;
  spec.top_mlp = {5, 1};
  ASSERT_TRUE(ValidateModelSpec(spec).ok()) << ValidateModelSpec(spec);
  const std::string yaml = ModelSpecToYaml(spec);
  absl::StatusOr<ModelSpec> back = ParseModelSpec(yaml, "some/dir");
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << yaml;
  ExpectSameSpec(spec, *back);

  absl::StatusOr<ModelSpec> demo = ParseModelSpec(kGoodSpec, "models");
  ASSERT_TRUE(demo.ok());
  back = ParseModelSpec(ModelSpecToYaml(*demo), "models");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameSpec(*demo, *back);
}

TEST(ModelSpecTest, RejectsInvalidYaml) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec("name: [unclosed\n", "");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("invalid YAML"));
  EXPECT_FALSE(ParseModelSpec("- just\n- a list\n", "").ok());
}

TEST(ModelSpecTest, MissingFileIsNotFoundWithPath) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpecFile("/nonexistent/dir/x.yaml");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(spec.status().message(), HasSubstr("/nonexistent/dir/x.yaml"));
}

TEST(ModelSpecTest, FileResolvesWeightsBesideIt) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fuserank_spec_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "demo.yaml").string();
  std::ofstream(path) << kGoodSpec;
  absl::StatusOr<ModelSpec> spec = ParseModelSpecFile(path);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->weights_path, (dir / "demo.safetensors").string());
}

struct BadCase {
  std::string from;      // text of kGoodSpec to replace
  std::string to;        // replacement
  std::string expected;  // "field: reason" fragment the message must contain
};

class ModelSpecBadFieldTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ModelSpecBadFieldTest, ErrorNamesFileAndField) {
  const BadCase& c = GetParam();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fuserank_spec_bad_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "bad.yaml").string();
  std::ofstream(path) << Replace(kGoodSpec, c.from, c.to);
  absl::StatusOr<ModelSpec> spec = ParseModelSpecFile(path);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(spec.ok()) << "accepted: " << c.to;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr(path + ": "));
  EXPECT_THAT(spec.status().message(), HasSubstr(c.expected));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ModelSpecBadFieldTest,
    ::testing::Values(
        BadCase{"name: demo", "name: \"\"", "name: must not be empty"},
        BadCase{"weights: demo.safetensors\n", "", "weights: missing"},
        BadCase{"embedding_dtype: fp16", "embedding_dtype: fp64",
                "embedding_dtype: must be one of"},
        BadCase{"side: user", "side: both", "tables[0].side: must be one of user | item"},
        BadCase{"rows: 100000", "rows: 0", "tables[0].rows: must be in 1..2147483647, got 0"},
        BadCase{"rows: 100000", "rows: 2147483648", "tables[0].rows: must be in 1..2147483647"},
        BadCase{"rows: 100000", "rows: lots", "tables[0].rows: must be an integer"},
        BadCase{"rows: 500000, dim: 16", "rows: 500000, dim: 0",
                "tables[1].dim: must be >= 1, got 0"},
        BadCase{"pooling: mean", "pooling: max", "tables[0].pooling: must be one of sum | mean"},
        BadCase{"oov: reject", "oov: wrap", "tables[1].oov: must be one of modulo | reject"},
        BadCase{"name: item_id", "name: user_id", "tables[1].name: duplicate table name"},
        // Names SPEC section 6 gives KServe inputs: ModelInfer could not send these tables.
        BadCase{"name: item_id", "name: item_ids",
                "tables[1].name: 'item_ids' is the name of a KServe input of every model"},
        BadCase{"name: user_id", "name: user_dense",
                "tables[0].name: 'user_dense' is the name of a KServe input"},
        BadCase{"name: item_id", "name: user_id__weights",
                "tables[1].name: 'user_id__weights' is the KServe weights input of table "
                "'user_id'"},
        BadCase{"name: user_id", "name: item_id__lengths",
                "tables[0].name: 'item_id__lengths' is the KServe lengths input of table "
                "'item_id'"},
        BadCase{"pooling: mean}", "pooling: mean, colour: red}", "tables[0].colour: unknown key"},
        BadCase{"{name: user_id,  side: user,", "{side: user,", "tables[0].name: missing"},
        BadCase{"dense: {user: 4, item: 3}", "dense: {user: -1, item: 3}",
                "dense.user: must be in"},
        BadCase{"dense: {user: 4, item: 3}", "dense: {user: 4, items: 3}", "dense.items: unknown"},
        BadCase{"bottom_mlp: [64, 16]", "bottom_mlp: [64, 0]", "bottom_mlp[1]: must be in 1.."},
        BadCase{"bottom_mlp: [64, 16]", "bottom_mlp: 64", "bottom_mlp: must be a list"},
        BadCase{"interaction: dot", "interaction: cross", "interaction: must be one of"},
        BadCase{"top_mlp: [64, 32, 1]", "top_mlp: [64, 32, 2]",
                "top_mlp[2]: the last layer must have width 1"},
        BadCase{"top_mlp: [64, 32, 1]", "top_mlp: []", "top_mlp: must not be empty"},
        BadCase{"cross_dim: 0", "cross_dim: 0\nlearning_rate: 0.1", "learning_rate: unknown key"},
        BadCase{"rows: 500000, dim: 16", "rows: 500000, dim: 8",
                "tables[1].dim: interaction dot needs every vector the same width: got 8, "
                "expected 16"},
        BadCase{"interaction: dot", "interaction: linear", "cross_dim: must be >= 1"},
        BadCase{"cross_dim: 0", "cross_dim: 32", "cross_dim: must be 0 unless interaction is"},
        BadCase{"dense: {user: 4, item: 3}", "dense: {user: 0, item: 0}",
                "bottom_mlp: there are no dense features"},
        BadCase{"interaction: dot", "interaction: dcn", "dcn: must be given with interaction: dcn"},
        BadCase{"interaction: dot", "interaction: dcn\ndcn: {low_rank: 4}", "dcn.layers: missing"},
        BadCase{"interaction: dot", "interaction: dcn\ndcn: {layers: 0, low_rank: 4}",
                "dcn.layers: must be in 1..64 with interaction: dcn, got 0"},
        BadCase{"interaction: dot", "interaction: dcn\ndcn: {layers: 65}",
                "dcn.layers: must be in 1..64"},
        BadCase{"interaction: dot", "interaction: dcn\ndcn: {layers: 2, low_rank: -1}",
                "dcn.low_rank: must be in 0.."},
        BadCase{"interaction: dot", "interaction: dcn\ndcn: {layers: 2, rank: 4}",
                "dcn.rank: unknown key"},
        BadCase{"interaction: dot", "interaction: dcn\ndcn: 3", "dcn: must be a map like"},
        BadCase{"interaction: dot\ncross_dim: 0",
                "interaction: dcn\ndcn: {layers: 2}\ncross_dim: 3",
                "cross_dim: must be 0 unless interaction is linear"},
        BadCase{"cross_dim: 0", "cross_dim: 0\ndcn: {layers: 2}",
                "dcn: must be absent unless interaction is dcn"}));

// The rules of the one YAML reader (engine/yaml_reader.h), which the server config shares.
INSTANTIATE_TEST_SUITE_P(
    ReaderRules, ModelSpecBadFieldTest,
    ::testing::Values(
        BadCase{"interaction: dot", "interaction: dot\ninteraction: concat",
                "interaction: given more than once"},
        BadCase{"pooling: mean}", "pooling: mean, dim: 8}", "tables[0].dim: given more than once"},
        BadCase{"rows: 100000", "rows: \"100000\"",
                "tables[0].rows: must be an integer, got the string '100000'"},
        BadCase{"dense: {user: 4, item: 3}", "dense: {user: \"4\", item: 3}",
                "dense.user: must be an integer, got the string '4'"},
        BadCase{"bottom_mlp: [64, 16]", "bottom_mlp: [64, \"16\"]",
                "bottom_mlp[1]: must be an integer, got the string '16'"},
        BadCase{"cross_dim: 0", "cross_dim: 0\ncross: 4",
                "cross: unknown key (known here: name, version, weights"},
        BadCase{"rows: 500000, dim: 16", "rows: 500000, dim: 99999999999",
                "tables[1].dim: is out of range, got 99999999999"},
        BadCase{"rows: 100000", "rows: 1.5", "tables[0].rows: must be an integer, got '1.5'"},
        BadCase{"top_mlp: [64, 32, 1]", "top_mlp: {width: 1}",
                "top_mlp: must be a list of integers, e.g. [64, 32, 1], got a map"},
        BadCase{"name: demo", "name: [demo]", "name: must be a string, got a list"}));

TEST(ModelSpecTest, NeedsATableOrDenseFeature) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(R"(name: m
weights: m.safetensors
interaction: concat
top_mlp: [1]
)",
                                                  "");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("at least one table or dense feature"));
}

TEST(ModelSpecTest, ReportsEveryProblemAtOnce) {
  std::string yaml = Replace(kGoodSpec, "rows: 100000", "rows: 0");
  yaml = Replace(yaml, "top_mlp: [64, 32, 1]", "top_mlp: [64, 32, 3]");
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(yaml, "");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("tables[0].rows"));
  EXPECT_THAT(spec.status().message(), HasSubstr("top_mlp[2]"));
}

}  // namespace
}  // namespace fuserank::engine
