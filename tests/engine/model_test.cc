// Model loading: every part of the spec built from tensors or mapped from the weights file
// in fp32/fp16/bf16, the linear cross folded exactly, load errors naming the file, and
// fuserank-gen-model's output loading. Tensors refused against the spec:
// model_tensor_checks_test.cc.
#include "engine/model.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model_test_util.h"

namespace fuserank::engine {
namespace {

using test::ModelTestDir;
using test::RandomWeights;
using test::TestSpec;
using test::Weights;
using test::WriteModel;
using ::testing::HasSubstr;

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
  ModelTestDir dir;
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
  ModelTestDir dir;
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
  ModelTestDir dir;
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
  // The demo model: SPEC section 2's example, exactly.
  const std::string demo_command =
      gen + " --out=" + dir.File("demo.yaml") + " --name=demo --preset=demo > /dev/null";
  ASSERT_EQ(std::system(demo_command.c_str()), 0);
  absl::StatusOr<std::shared_ptr<const Model>> demo = Model::Load(dir.File("demo.yaml"));
  ASSERT_TRUE(demo.ok()) << demo.status();
  const ModelSpec& demo_spec = (*demo)->spec();
  ASSERT_EQ(demo_spec.tables.size(), 2u);
  EXPECT_EQ(demo_spec.tables[0].name, "user_id");
  EXPECT_EQ(demo_spec.tables[0].side, Side::kUser);
  EXPECT_EQ(demo_spec.tables[0].rows, 100000);
  EXPECT_EQ(demo_spec.tables[1].name, "item_id");
  EXPECT_EQ(demo_spec.tables[1].side, Side::kItem);
  EXPECT_EQ(demo_spec.tables[1].rows, 500000);
  EXPECT_EQ(demo_spec.tables[1].oov, Oov::kModulo);
  for (const TableSpec& table : demo_spec.tables) {
    EXPECT_EQ(table.dim, 16);
    EXPECT_EQ(table.pooling, Pooling::kSum);
  }
  EXPECT_EQ(demo_spec.dense_user, 4);
  EXPECT_EQ(demo_spec.dense_item, 3);
  EXPECT_EQ(demo_spec.bottom_mlp, (std::vector<int>{64, 16}));
  EXPECT_EQ(demo_spec.interaction, Interaction::kDot);
  EXPECT_EQ(demo_spec.top_mlp, (std::vector<int>{64, 32, 1}));
  const std::string scaled_demo =
      gen + " --out=" + dir.File("bad.yaml") + " --preset=demo --row_scale=0.5 2> /dev/null";
  EXPECT_NE(std::system(scaled_demo.c_str()), 0);
  const std::string shaped =
      gen + " --out=" + dir.File("bad.yaml") + " --preset=dlrm_v2 --dim=8 2> /dev/null";
  EXPECT_NE(std::system(shaped.c_str()), 0);
  const std::string bad = gen + " --out=" + dir.File("bad.yaml") + " --top_mlp=4,2 2> /dev/null";
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_FALSE(std::filesystem::exists(dir.File("bad.yaml")));
}

}  // namespace
}  // namespace fuserank::engine
