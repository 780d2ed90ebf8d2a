// Model loading: every tensor checked against the spec (dtype, shape, missing, extra),
// fp32/fp16/bf16 tables, the linear cross folded exactly, and tables served from the
// mapping rather than copied.
#include "engine/model.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_dtype.h"
#include "engine/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("fuserank_model_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Tensors built in memory, each also kept as float values for reference math.
struct Weights {
  std::map<std::string, std::vector<std::byte>> bytes;
  std::map<std::string, std::vector<float>> values;  // as stored (after dtype rounding)
  TensorMap tensors;

  void Add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
           std::vector<float> v) {
    std::vector<std::byte>& b = bytes[name];
    const size_t element = SafetensorsDTypeSize(dtype);
    b.resize(v.size() * element);
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == "F32") {
        std::memcpy(&b[i * 4], &v[i], 4);
      } else {
        const uint16_t h = dtype == "F16" ? FloatToHalf(v[i]) : FloatToBFloat16(v[i]);
        v[i] = dtype == "F16" ? HalfToFloat(h) : BFloat16ToFloat(h);
        std::memcpy(&b[i * 2], &h, 2);
      }
    }
    values[name] = std::move(v);
    tensors[name] = TensorView{dtype, std::move(shape), b.data(), b.size()};
  }
  void Remove(const std::string& name) { tensors.erase(name); }
};

ModelSpec TestSpec(DType dtype, Interaction interaction) {
  ModelSpec spec;
  spec.name = "test";
  spec.version = "3";
  spec.weights_path = "test.safetensors";
  spec.embedding_dtype = dtype;
  spec.tables = {{"user_a", Side::kUser, 50, 8, Pooling::kSum, Oov::kModulo},
                 {"item_a", Side::kItem, 40, 8, Pooling::kMean, Oov::kReject},
                 {"user_b", Side::kUser, 30, 8, Pooling::kSum, Oov::kModulo}};
  spec.dense_user = 3;
  spec.dense_item = 2;
  spec.bottom_mlp = {16, 8};
  spec.interaction = interaction;
  spec.cross_dim = interaction == Interaction::kLinear ? 10 : 0;
  spec.top_mlp = {12, 6, 1};
  return spec;
}

Weights RandomWeights(const ModelSpec& spec, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  Weights w;
  const std::string dtype(SafetensorsDType(spec.embedding_dtype));
  for (const TableSpec& t : spec.tables) {
    w.Add("embeddings." + t.name + ".weight", dtype, {t.rows, t.dim}, random(t.rows * t.dim));
  }
  auto layer = [&](const std::string& prefix, int in, int out) {
    w.Add(prefix + ".weight", "F32", {out, in}, random(static_cast<size_t>(out) * in));
    w.Add(prefix + ".bias", "F32", {out}, random(out));
  };
  int in = spec.dense_total();
  for (size_t i = 0; i < spec.bottom_mlp.size(); ++i) {
    layer("bottom_mlp." + std::to_string(i), in, spec.bottom_mlp[i]);
    in = spec.bottom_mlp[i];
  }
  in = spec.interaction_width();
  if (spec.interaction == Interaction::kLinear) {
    layer("cross", spec.concat_width(), spec.cross_dim);
    in = spec.cross_dim;
  }
  for (size_t i = 0; i < spec.top_mlp.size(); ++i) {
    layer("top_mlp." + std::to_string(i), in, spec.top_mlp[i]);
    in = spec.top_mlp[i];
  }
  return w;
}

// Writes spec + weights into `dir`; returns the spec path.
std::string WriteModel(const TempDir& dir, ModelSpec spec, const TensorMap& tensors) {
  spec.weights_path = dir.File(spec.name + ".safetensors");
  std::vector<std::pair<std::string, TensorView>> list(tensors.begin(), tensors.end());
  EXPECT_TRUE(WriteSafetensors(spec.weights_path, list).ok());
  const std::string path = dir.File(spec.name + ".yaml");
  std::ofstream(path) << ModelSpecToYaml(spec);
  return path;
}

void ExpectModelMatches(const Model& model, const ModelSpec& spec, const Weights& w) {
  ASSERT_EQ(model.tables().size(), spec.tables.size());
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    const EmbeddingTable& t = model.tables()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, spec.tables[i].name);
    EXPECT_EQ(t.spec_index, static_cast<int>(i));
    EXPECT_EQ(t.side, spec.tables[i].side);
    EXPECT_EQ(t.pooling, spec.tables[i].pooling);
    EXPECT_EQ(t.oov, spec.tables[i].oov);
    EXPECT_EQ(t.dtype, spec.embedding_dtype);
    EXPECT_EQ(t.rows, spec.tables[i].rows);
    EXPECT_EQ(t.dim, spec.tables[i].dim);
    const std::vector<std::byte>& src = w.bytes.at("embeddings." + t.name + ".weight");
    EXPECT_EQ(t.row_bytes, src.size() / t.rows);
    ASSERT_NE(t.data, nullptr);
    EXPECT_NE(t.data, src.data());  // copied or mapped, never the caller's buffer
    EXPECT_EQ(std::memcmp(t.data, src.data(), src.size()), 0);
  }
  EXPECT_EQ(model.user_tables(), (std::vector<int>{0, 2}));
  EXPECT_EQ(model.item_tables(), (std::vector<int>{1}));
  EXPECT_EQ(model.FindTable("user_b"), 2);
  EXPECT_EQ(model.FindTable("nope"), -1);
  ASSERT_EQ(model.bottom_mlp().size(), spec.bottom_mlp.size());
  int in = spec.dense_total();
  for (size_t i = 0; i < spec.bottom_mlp.size(); ++i) {
    const DenseLayer& l = model.bottom_mlp()[i];
    EXPECT_EQ(l.in, in);
    EXPECT_EQ(l.out, spec.bottom_mlp[i]);
    EXPECT_TRUE(l.relu);  // ReLU after every bottom layer, the last one too
    EXPECT_EQ(l.weight, w.values.at("bottom_mlp." + std::to_string(i) + ".weight"));
    EXPECT_EQ(l.bias, w.values.at("bottom_mlp." + std::to_string(i) + ".bias"));
    in = l.out;
  }
  ASSERT_EQ(model.top_mlp().size(), spec.top_mlp.size());
  in = spec.interaction_width();
  for (size_t i = 0; i < spec.top_mlp.size(); ++i) {
    const DenseLayer& l = model.top_mlp()[i];
    EXPECT_EQ(l.in, in);
    EXPECT_EQ(l.out, spec.top_mlp[i]);
    EXPECT_EQ(l.relu, i + 1 < spec.top_mlp.size());
    if (i > 0 || spec.interaction != Interaction::kLinear) {
      EXPECT_EQ(l.weight, w.values.at("top_mlp." + std::to_string(i) + ".weight"));
    }
    in = l.out;
  }
}

class ModelDTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(ModelDTypeTest, FromTensorsCopiesEveryPart) {
  const ModelSpec spec = TestSpec(GetParam(), Interaction::kDot);
  const Weights w = RandomWeights(spec, 11);
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::FromTensors(spec, w.tensors);
  ASSERT_TRUE(model.ok()) << model.status();
  ExpectModelMatches(**model, spec, w);
}

TEST_P(ModelDTypeTest, LoadMapsTheWeightsFile) {
  const ModelSpec spec = TestSpec(GetParam(), Interaction::kConcat);
  const Weights w = RandomWeights(spec, 12);
  TempDir dir;
  const std::string path = WriteModel(dir, spec, w.tensors);
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->spec().weights_path, dir.File("test.safetensors"));
  EXPECT_EQ((*model)->spec().version, "3");
  ExpectModelMatches(**model, spec, w);
  for (const EmbeddingTable& t : (*model)->tables()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % SafetensorsDTypeSize(SafetensorsDType(t.dtype)),
              0u);
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, ModelDTypeTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

absl::Status BuildWith(const Weights& w, DType dtype = DType::kF32) {
  return Model::FromTensors(TestSpec(dtype, Interaction::kDot), w.tensors).status();
}

TEST(ModelTest, RefusesWrongTableDtype) {
  Weights w = RandomWeights(TestSpec(DType::kF16, Interaction::kDot), 1);
  absl::Status status = BuildWith(w, DType::kF32);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      status.message(),
      HasSubstr("tensor 'embeddings.user_a.weight': expected F32 [50, 8], got F16 [50, 8]"));
}

TEST(ModelTest, RefusesWrongDenseDtype) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 1);
  w.tensors["top_mlp.1.bias"].dtype = "F64";
  w.tensors["top_mlp.1.bias"].nbytes *= 2;
  EXPECT_THAT(BuildWith(w).message(),
              HasSubstr("tensor 'top_mlp.1.bias': expected F32 [6], got F64 [6]"));
}

TEST(ModelTest, RefusesWrongShape) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 2);
  w.tensors["bottom_mlp.1.weight"].shape = {16, 8};  // transposed
  EXPECT_THAT(BuildWith(w).message(),
              HasSubstr("tensor 'bottom_mlp.1.weight': expected F32 [8, 16], got F32 [16, 8]"));
}

TEST(ModelTest, RefusesByteCountThatDisagreesWithShape) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 2);
  w.tensors["top_mlp.2.weight"].nbytes -= 4;
  EXPECT_THAT(BuildWith(w).message(), HasSubstr("tensor 'top_mlp.2.weight': holds 20 bytes"));
}

TEST(ModelTest, RefusesMissingTensor) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 3);
  w.Remove("embeddings.item_a.weight");
  w.Remove("top_mlp.0.bias");
  absl::Status status = BuildWith(w);
  EXPECT_THAT(status.message(),
              HasSubstr("tensor 'embeddings.item_a.weight' is missing (expected F32 [40, 8])"));
  EXPECT_THAT(status.message(), HasSubstr("tensor 'top_mlp.0.bias' is missing"));
}

TEST(ModelTest, RefusesTensorsNotInTheSpec) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 4);
  w.tensors["top_mlp.3.weight"] = w.tensors["top_mlp.2.weight"];
  absl::Status status = BuildWith(w);
  EXPECT_THAT(status.message(), HasSubstr("tensors not in the spec: 'top_mlp.3.weight'"));
  // A typo'd name is both missing and extra.
  w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 4);
  w.tensors["embeddings.usera.weight"] = w.tensors["embeddings.user_a.weight"];
  w.Remove("embeddings.user_a.weight");
  status = BuildWith(w);
  EXPECT_THAT(status.message(), HasSubstr("'embeddings.user_a.weight' is missing"));
  EXPECT_THAT(status.message(), HasSubstr("not in the spec: 'embeddings.usera.weight'"));
}

TEST(ModelTest, RefusesNonFiniteDenseWeights) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 5);
  const float nan = std::nanf("");
  std::memcpy(w.bytes["bottom_mlp.0.weight"].data() + 4 * 7, &nan, 4);
  EXPECT_THAT(BuildWith(w).message(), HasSubstr("tensor 'bottom_mlp.0.weight': element 7 is nan"));
}

TEST(ModelTest, RefusesInvalidSpecAndInt8WithoutQuantizedTensors) {
  Weights w = RandomWeights(TestSpec(DType::kF32, Interaction::kDot), 6);
  ModelSpec spec = TestSpec(DType::kF32, Interaction::kDot);
  spec.top_mlp.back() = 2;
  EXPECT_THAT(Model::FromTensors(spec, w.tensors).status().message(), HasSubstr("top_mlp[2]"));
  spec = TestSpec(DType::kInt8, Interaction::kDot);
  absl::Status status = Model::FromTensors(spec, w.tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor 'embeddings.user_a.weight': expected I8"));
  EXPECT_THAT(status.message(), HasSubstr("tensor 'embeddings.user_a.qparams' is missing"));
}

TEST(ModelTest, FoldsLinearCrossIntoFirstTopLayer) {
  const uint32_t seed = 977;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const ModelSpec spec = TestSpec(DType::kF32, Interaction::kLinear);
  const Weights w = RandomWeights(spec, seed);
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::FromTensors(spec, w.tensors);
  ASSERT_TRUE(model.ok()) << model.status();
  const DenseLayer& folded = (*model)->top_mlp()[0];
  const int c_dim = spec.concat_width(), k_dim = spec.cross_dim, o_dim = spec.top_mlp[0];
  ASSERT_EQ(folded.in, c_dim);
  ASSERT_EQ(folded.out, o_dim);
  EXPECT_TRUE(folded.relu);
  ASSERT_EQ(folded.weight.size(), static_cast<size_t>(o_dim * c_dim));
  const std::vector<float>& wc = w.values.at("cross.weight");
  const std::vector<float>& bc = w.values.at("cross.bias");
  const std::vector<float>& wt = w.values.at("top_mlp.0.weight");
  const std::vector<float>& bt = w.values.at("top_mlp.0.bias");
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> x(c_dim);
    for (double& v : x) v = u(rng);
    std::vector<double> h(k_dim);  // h = W_cross x + b_cross
    for (int k = 0; k < k_dim; ++k) {
      h[k] = bc[k];
      for (int c = 0; c < c_dim; ++c) h[k] += double{wc[k * c_dim + c]} * x[c];
    }
    for (int o = 0; o < o_dim; ++o) {
      double want = bt[o];  // W_top1 h + b_top1
      for (int k = 0; k < k_dim; ++k) want += double{wt[o * k_dim + k]} * h[k];
      double got = folded.bias[o];
      for (int c = 0; c < c_dim; ++c) got += double{folded.weight[o * c_dim + c]} * x[c];
      EXPECT_NEAR(got, want, 1e-5) << "trial " << trial << " output " << o;
    }
  }
}

TEST(ModelTest, LoadErrorsNameTheFile) {
  const ModelSpec spec = TestSpec(DType::kF32, Interaction::kDot);
  Weights w = RandomWeights(spec, 7);
  TempDir dir;
  w.tensors["top_mlp.0.weight"].shape = {12, 18};
  w.tensors["top_mlp.0.weight"].nbytes = 12 * 18 * 4;
  w.bytes["top_mlp.0.weight"].resize(12 * 18 * 4);
  w.tensors["top_mlp.0.weight"].data = w.bytes["top_mlp.0.weight"].data();
  const std::string path = WriteModel(dir, spec, w.tensors);
  absl::Status status = Model::Load(path).status();  // larger than the spec says: not read
  EXPECT_THAT(std::string(status.message()), HasSubstr(dir.File("test.safetensors") + ": "));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tensor 'top_mlp.0.weight': expected F32 [12, 14], got F32 [12, 18]"));

  // Truncated weights.
  w = RandomWeights(spec, 7);
  WriteModel(dir, spec, w.tensors);
  std::filesystem::resize_file(dir.File("test.safetensors"),
                               std::filesystem::file_size(dir.File("test.safetensors")) - 10);
  status = Model::Load(path).status();
  EXPECT_THAT(status.message(), HasSubstr(dir.File("test.safetensors") + ": tensor '"));
  EXPECT_THAT(status.message(), HasSubstr("truncated"));

  // Missing weights, bad spec.
  std::filesystem::remove(dir.File("test.safetensors"));
  status = Model::Load(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(dir.File("test.safetensors")));
  std::ofstream(path) << "name: x\n";
  EXPECT_THAT(Model::Load(path).status().message(), HasSubstr(path + ": "));
}

// fuserank-gen-model's output loads (its streaming writer, every dtype, the linear cross,
// dcn, the DLRM-v2 preset).
TEST(ModelTest, GeneratedModelsLoad) {
  const std::string gen = std::string(FUSERANK_BINARY_DIR) + "/bin/fuserank-gen-model";
  if (!std::filesystem::exists(gen)) GTEST_SKIP() << "build fuserank-gen-model first: " << gen;
  TempDir dir;
  const std::string flags[] = {
      "--user_tables=2 --item_tables=3 --rows=100,200,300,400,500 --dim=16 --dense_user=4 "
      "--dense_item=3 --bottom_mlp=64,16 --interaction=dot --top_mlp=64,32,1",
      "--user_tables=1 --item_tables=2 --rows=77 --dim=8 --dense_item=2 --interaction=linear "
      "--cross_dim=12 --top_mlp=16,1 --dtype=bf16 --pooling=mean --oov=reject",
      "--user_tables=0 --item_tables=3 --rows=1001 --dim=3 --interaction=concat "
      "--top_mlp=1 --dtype=fp16",
      "--user_tables=1 --item_tables=2 --rows=50 --dim=4 --dense_item=2 --interaction=dcn "
      "--dcn_layers=2 --dcn_low_rank=3 --top_mlp=4,1",
      "--user_tables=1 --item_tables=1 --rows=50 --dim=4 --interaction=dcn --dcn_layers=1 "
      "--top_mlp=1"};
  for (const std::string& f : flags) {
    SCOPED_TRACE(f);
    const std::string spec_path = dir.File("gen.yaml");
    const std::string command = gen + " --out=" + spec_path + " --seed=5 " + f + " > /dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0);
    absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(spec_path);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->spec().name, "gen");
    EXPECT_EQ((*model)->top_mlp()[0].in, (*model)->spec().interaction_width());
  }
  // The MLPerf DLRM-v2 shape, rows scaled by 1e-4: 40M-row tables get 4000, small ones keep
  // min(own rows, 1024).
  const std::string preset = gen + " --out=" + dir.File("dlrm.yaml") +
                             " --preset=dlrm_v2 --row_scale=0.0001 --dtype=fp16 > /dev/null";
  ASSERT_EQ(std::system(preset.c_str()), 0);
  absl::StatusOr<std::shared_ptr<const Model>> dlrm = Model::Load(dir.File("dlrm.yaml"));
  ASSERT_TRUE(dlrm.ok()) << dlrm.status();
  const ModelSpec& spec = (*dlrm)->spec();
  ASSERT_EQ(spec.tables.size(), 26u);
  EXPECT_EQ(spec.tables[0].rows, 4000);
  EXPECT_EQ(spec.tables[1].rows, 1024);  // 39060 scaled to 4, kept at 1024
  EXPECT_EQ(spec.tables[5].rows, 3);     // fewer than 1024: its own count
  EXPECT_EQ(spec.tables[0].dim, 128);
  EXPECT_EQ(spec.dense_item, 13);
  EXPECT_EQ(spec.bottom_mlp, (std::vector<int>{512, 256, 128}));
  EXPECT_EQ(spec.interaction, Interaction::kDcn);
  EXPECT_EQ(spec.dcn.layers, 3);
  EXPECT_EQ(spec.dcn.low_rank, 512);
  EXPECT_EQ(spec.top_mlp, (std::vector<int>{1024, 1024, 512, 256, 1}));
  EXPECT_EQ(spec.concat_width(), 128 * 27);
  const std::string shaped =
      gen + " --out=" + dir.File("bad.yaml") + " --preset=dlrm_v2 --dim=8 2> /dev/null";
  EXPECT_NE(std::system(shaped.c_str()), 0);
  const std::string bad = gen + " --out=" + dir.File("bad.yaml") + " --top_mlp=4,2 2> /dev/null";
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_FALSE(std::filesystem::exists(dir.File("bad.yaml")));
}

}  // namespace
}  // namespace fuserank::engine
