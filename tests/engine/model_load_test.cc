// Model::Load against files an operator (or an attacker with a reload) can put in its way:
// the weights are a private copy, so truncating or rewriting the file after the load
// changes nothing and cannot fault the process; non-regular files are refused at once;
// sizes, the memory limit and finite table values are checked before anything serves;
// messages quote no raw file bytes.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/escape_text.h"
#include "engine/model.h"
#include "engine/model_memory.h"
#include "engine/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

class ModelLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/model_load_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
                        getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A small dot model written to dir_; returns the spec path.
  std::string WriteSmall(uint64_t seed, fuserank::testing::TestModel* out = nullptr) {
    ModelSpec spec = fuserank::testing::SmallSpec(1, 2, 300, 8);
    spec.name = "small";
    spec.weights_path = "small.safetensors";
    fuserank::testing::TestModel model = fuserank::testing::MakeRandomModel(spec, seed);
    absl::StatusOr<std::string> path = fuserank::testing::WriteTestModel(model, dir_);
    EXPECT_TRUE(path.ok()) << path.status();
    if (out != nullptr) *out = model;
    return path.ok() ? *path : "";
  }

  std::vector<std::vector<float>> Score(const std::shared_ptr<const Model>& model, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<test::RefRequest> requests;
    for (int i = 0; i < 3; ++i) {
      requests.push_back(test::RandomRequest(model->spec(), test::RequestShape{}, rng));
    }
    std::unique_ptr<Backend> backend = CreateCpuBackend(model, BackendOptions{});
    BatchResult result;
    return test::ScoresByIndex(*backend, 0, test::MakeBatch(model, requests), result);
  }

  std::string dir_;
};

TEST_F(ModelLoadTest, TheWeightsAreAPrivateCopyThatOutlivesTruncationAndRewrites) {
  const std::string path = WriteSmall(5);
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<std::vector<float>> before = Score(*model, 9);
  std::vector<std::vector<std::byte>> rows_before;
  for (const EmbeddingTable& t : (*model)->tables()) {
    rows_before.emplace_back(t.data, t.data + t.rows * t.row_bytes);
  }
  const std::string weights = dir_ + "/small.safetensors";
  const uintmax_t size = fs::file_size(weights);
  // Rewritten in place (same inode) with other bytes, then truncated to nothing: a shared
  // mapping would now read the new bytes, then fault with SIGBUS.
  {
    std::fstream rewrite(weights, std::ios::in | std::ios::out | std::ios::binary);
    const std::string junk(static_cast<size_t>(size), '\x7f');
    rewrite.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const std::vector<std::vector<float>> rewritten = Score(*model, 9);
  fs::resize_file(weights, 0);
  for (size_t i = 0; i < (*model)->tables().size(); ++i) {
    const EmbeddingTable& t = (*model)->tables()[i];
    EXPECT_EQ(std::memcmp(t.data, rows_before[i].data(), rows_before[i].size()), 0) << t.name;
  }
  EXPECT_EQ(Score(*model, 9), before);
  EXPECT_EQ(rewritten, before);
}

TEST_F(ModelLoadTest, NonRegularFilesAreRefusedAtOnce) {
  const std::string spec_path = WriteSmall(5);
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), dir_}) {
    SCOPED_TRACE(path);
    // As the spec: a FIFO would block the read, /dev/zero would stream without end.
    absl::Status status = Model::Load(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(), AllOf(HasSubstr(path), HasSubstr("not a regular file")));
    // As the weights.
    absl::StatusOr<ModelSpec> spec = ParseModelSpecFile(spec_path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec->weights_path = path;
    status = Model::Load(*spec, ModelLoadOptions{}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(), HasSubstr("not a regular file"));
  }
  EXPECT_EQ(Model::Load(dir_ + "/missing.yaml").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelLoadTest, ASpecLargerThanTheBoundIsNotRead) {
  const std::string path = WriteSmall(5);
  std::string text;
  {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream(path, std::ios::app) << "#" << std::string(kMaxModelSpecBytes, 'x') << "\n";
  const absl::Status status = Model::Load(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("more than the limit of 1048576"));
}

TEST_F(ModelLoadTest, AWeightsFileLargerThanTheSpecImpliesIsRefusedBeforeItIsRead) {
  const std::string path = WriteSmall(5);
  absl::StatusOr<ModelSpec> spec = ParseModelSpecFile(path);
  ASSERT_TRUE(spec.ok());
  spec->tables[0].rows = 100;  // the file holds 300 rows of 8 floats
  const std::string weights = dir_ + "/small.safetensors";
  absl::Status status = Model::Load(*spec, ModelLoadOptions{}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(weights + ": the file is "), HasSubstr(" 6400 more than its header"),
                    HasSubstr(absl::StrCat("the spec's tensors (", SpecTensorBytes(*spec))),
                    HasSubstr("tensor 'embeddings.user_0.weight': expected F32 [100, 8], got "
                              "F32 [300, 8]")));
  // Bytes after the last tensor are refused the same way.
  std::ofstream(weights, std::ios::app | std::ios::binary) << "extra";
  status = Model::Load(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(", 5 more than its header"));
  // A huge header length is refused from the first 8 bytes.
  std::ofstream(weights, std::ios::trunc | std::ios::binary)
      << std::string("\xff\xff\xff\xff") + std::string(12, '\0');
  status = Model::Load(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("header length 4294967295 exceeds the limit"));
}

// interaction: linear folds W_top1 [out, cross_dim] * W_cross [cross_dim, concat] into an
// [out, concat] layer: 2^20 x 2^20 floats (4 TiB) from 12 MB of tensors.
TEST_F(ModelLoadTest, AFoldOfTerabytesIsRefusedByTheMemoryLimitBeforeAllocating) {
  ModelSpec spec;
  spec.name = "fold";
  spec.dense_user = 1 << 20;
  spec.interaction = Interaction::kLinear;
  spec.cross_dim = 1;
  spec.top_mlp = {1 << 20, 1};
  spec.weights_path = "unused";
  fuserank::testing::TestModel model;
  model.spec = spec;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"cross.weight", {1, 1 << 20}},     {"cross.bias", {1}},
      {"top_mlp.0.weight", {1 << 20, 1}}, {"top_mlp.0.bias", {1 << 20}},
      {"top_mlp.1.weight", {1, 1 << 20}}, {"top_mlp.1.bias", {1}}};
  std::map<std::string, std::vector<float>> values;
  TensorMap tensors;
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    values[name].assign(static_cast<size_t>(n), 0.001f);
    tensors[name] =
        TensorView{"F32", shape, reinterpret_cast<const std::byte*>(values[name].data()),
                   static_cast<size_t>(n) * 4};
  }
  const ModelMemory memory = EstimateModelMemory(spec, 0, ServingShape{});
  EXPECT_GT(memory.dense, uint64_t{4} << 40);
  ModelLoadOptions options;
  options.max_bytes = uint64_t{1} << 30;
  const absl::Status status = Model::FromTensors(spec, tensors, options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("the model needs 4.0 TiB"),
                                      HasSubstr("more than the limit of 1.0 GiB")));
}

class NonFiniteTableTest : public ::testing::TestWithParam<DType> {};

TEST_P(NonFiniteTableTest, IsRefusedNamingTheTableAndTheRow) {
  ModelSpec spec = fuserank::testing::SmallSpec(1, 1, 50, 4);
  spec.embedding_dtype = GetParam();
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    fuserank::testing::TestModel model = fuserank::testing::MakeRandomModel(spec, 3);
    model.weights["embeddings.item_0.weight"][37 * 4 + 2] = bad;
    absl::StatusOr<std::shared_ptr<const Model>> built = fuserank::testing::BuildTestModel(model);
    ASSERT_FALSE(built.ok()) << bad;
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(built.status().message(),
                HasSubstr("table 'item_0': row 37 holds a NaN or Inf (element 2)"));
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, NonFiniteTableTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) {
                           return std::string(test::DTypeLabel(info.param));
                         });

TEST_F(ModelLoadTest, MessagesQuoteNoRawFileBytes) {
  // A spec with control characters (YAML escapes \e and \a) in a value and an unknown key.
  const std::string spec_path = dir_ + "/bad.yaml";
  std::ofstream(spec_path) << "name: x\nweights: w\ninteraction: \"dot\\e[31m\"\n"
                              "top_mlp: [1]\n\"k\\a\\nl\": 1\n";
  absl::Status status = Model::Load(spec_path).status();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), AllOf(HasSubstr("'dot\\x1b[31m'"), HasSubstr("k\\x07\\nl")));
  EXPECT_TRUE(IsPrintableUtf8(status.message())) << status;
  // A safetensors header whose syntax error sits on a secret byte.
  const std::string header = "{\"a\":S3CRET}";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  file += header;
  status = ParseSafetensors(reinterpret_cast<const std::byte*>(file.data()), file.size()).status();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("at byte 5"), Not(HasSubstr("S3CRET")), Not(HasSubstr("'S'"))));
  // Names of tensors are escaped.
  const std::string named = "{\"t\\n\\u0007\":{}}";
  file.assign(8, '\0');
  file[0] = static_cast<char>(named.size());
  file += named;
  status = ParseSafetensors(reinterpret_cast<const std::byte*>(file.data()), file.size()).status();
  EXPECT_THAT(status.message(), HasSubstr("tensor 't\\n\\x07'"));
  EXPECT_TRUE(IsPrintableUtf8(status.message())) << status;
}

}  // namespace
}  // namespace fuserank::engine
