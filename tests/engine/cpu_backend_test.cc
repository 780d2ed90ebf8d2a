// The CPU engine end to end (CreateCpuBackend): scores against the independent double
// reference of cpu_reference_util over random seeded models of every interaction, table
// dtype (fp32, fp16, bf16, row-wise int8) and shape variant, top-K order and ties, batch checks,
// stage timings, and no heap allocation in Run() after warm-up.
#include "engine/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu_simd.h"
#include "gtest/gtest.h"
#include "tests/engine/alloc_counter_util.h"
#include "tests/engine/cpu_reference_util.h"
#include "tests/engine/dtype_reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using fuserank::testing::BuildTestModel;
using fuserank::testing::MakeRandomModel;
using fuserank::testing::TestModel;
using test::MakeBatch;
using test::RandomRequest;
using test::RefRequest;
using test::RequestShape;

constexpr double kTolerance = 1e-5;

enum class Variant {
  kFull,           // user + item tables interleaved, both dense, bottom MLP, 3 top layers
  kNoDense,        // no dense features: no z
  kNoBottom,       // dense features without a bottom MLP: z = x
  kUserDenseOnly,  // dense_item = 0
  kItemDenseOnly,  // dense_user = 0
  kNoUserTables,   // item tables only
  kNoItemTables,   // user tables only (candidates differ by dense only)
  kSingleLayers,   // bottom [dim], top [1]
  kOddDims,        // dot: dim 17; concat / linear: a different dim per table
};

std::string VariantName(Variant v) {
  const char* names[] = {"Full",          "NoDense",       "NoBottom",
                         "UserDenseOnly", "ItemDenseOnly", "NoUserTables",
                         "NoItemTables",  "SingleLayers",  "OddDims"};
  return names[static_cast<int>(v)];
}

const char* DTypeLabel(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kInt8:
      return "I8";
  }
  return "?";
}

ModelSpec VariantSpec(Interaction interaction, DType dtype, Variant variant, std::mt19937_64& rng) {
  ModelSpec spec;
  spec.name = "cpu_test";
  spec.version = "1";
  spec.weights_path = "in-memory.safetensors";
  spec.embedding_dtype = dtype;
  spec.interaction = interaction;
  const int dim = variant == Variant::kOddDims && interaction == Interaction::kDot ? 17 : 8;
  // Sides interleaved in spec order so that spec order and per-side order differ.
  std::vector<Side> sides = {Side::kItem, Side::kUser, Side::kItem, Side::kItem, Side::kUser};
  if (variant == Variant::kNoUserTables) sides = {Side::kItem, Side::kItem, Side::kItem};
  if (variant == Variant::kNoItemTables) sides = {Side::kUser, Side::kUser};
  std::uniform_int_distribution<int64_t> rows(1, 300);
  std::uniform_int_distribution<int> odd_dim(1, 12), coin(0, 1);
  for (size_t t = 0; t < sides.size(); ++t) {
    TableSpec table;
    table.name = absl::StrCat(sides[t] == Side::kUser ? "user_" : "item_", t);
    table.side = sides[t];
    table.rows = t == 0 ? 1 : rows(rng);  // a one-row table: every id maps to row 0
    table.dim =
        variant == Variant::kOddDims && interaction != Interaction::kDot ? odd_dim(rng) : dim;
    table.pooling = coin(rng) ? Pooling::kMean : Pooling::kSum;
    spec.tables.push_back(table);
  }
  spec.dense_user = 3;
  spec.dense_item = 4;
  spec.bottom_mlp = {16, dim};
  spec.top_mlp = {12, 6, 1};
  spec.cross_dim = interaction == Interaction::kLinear ? 10 : 0;
  switch (variant) {
    case Variant::kNoDense:
      spec.dense_user = spec.dense_item = 0;
      spec.bottom_mlp.clear();
      break;
    case Variant::kNoBottom:
      spec.bottom_mlp.clear();
      spec.dense_item = dim - spec.dense_user;  // dot needs z of width dim
      break;
    case Variant::kUserDenseOnly:
      spec.dense_item = 0;
      break;
    case Variant::kItemDenseOnly:
      spec.dense_user = 0;
      break;
    case Variant::kSingleLayers:
      spec.bottom_mlp = {dim};
      spec.top_mlp = {1};
      break;
    default:
      break;
  }
  return spec;
}

// Replaces the tables' values by values exact in the dtype that cover many exponents,
// so the reference (the floats) is exactly the decoded stored values.
void UseExactTableValues(TestModel& model, std::mt19937_64& rng) {
  for (const TableSpec& table : model.spec.tables) {
    for (float& v : model.weights[absl::StrCat("embeddings.", table.name, ".weight")]) {
      v = test::RandomExactValue(model.spec.embedding_dtype, rng) * 0.5f;
    }
  }
}

// int8 tables: draws q and a (scale, bias) per row, keeps the dequantized values (exact
// in float: multiples of 1/512 below 2^12 / 512) as the reference's table values, and
// builds the model from I8 tables with F32 qparams (everything else F32).
absl::StatusOr<std::shared_ptr<const Model>> BuildInt8Model(TestModel& model,
                                                            std::mt19937_64& rng) {
  std::vector<std::vector<std::byte>> storage;
  storage.reserve(model.weights.size() + model.spec.tables.size());
  TensorMap tensors;
  auto add = [&](const std::string& name, const char* dtype, std::vector<int64_t> shape,
                 const void* data, size_t bytes) {
    const std::byte* p = static_cast<const std::byte*>(data);
    storage.emplace_back(p, p + bytes);
    tensors[name] = TensorView{dtype, std::move(shape), storage.back().data(), bytes};
  };
  std::uniform_int_distribution<int> q_dist(-128, 127), step(1, 16), offset(-64, 64);
  for (const TableSpec& table : model.spec.tables) {
    const std::string name = absl::StrCat("embeddings.", table.name, ".weight");
    std::vector<float>& values = model.weights[name];
    std::vector<int8_t> q(values.size());
    std::vector<float> qparams;
    for (int64_t r = 0; r < table.rows; ++r) {
      const float scale = step(rng) / 512.0f, bias = offset(rng) / 128.0f;
      qparams.push_back(scale);
      qparams.push_back(bias);
      for (int j = 0; j < table.dim; ++j) {
        q[r * table.dim + j] = static_cast<int8_t>(q_dist(rng));
        values[r * table.dim + j] = scale * q[r * table.dim + j] + bias;
      }
    }
    add(name, "I8", {table.rows, table.dim}, q.data(), q.size());
    add(absl::StrCat("embeddings.", table.name, ".qparams"), "F32", {table.rows, 2}, qparams.data(),
        qparams.size() * sizeof(float));
  }
  for (const auto& [name, values] : model.weights) {
    if (name.rfind("embeddings.", 0) == 0) continue;
    add(name, "F32", model.shapes.at(name), values.data(), values.size() * sizeof(float));
  }
  return Model::FromTensors(model.spec, tensors);
}

// Runs `batch` and returns all scores per request by candidate index (top_k must be all).
std::vector<std::vector<float>> ScoresByIndex(Backend& backend, int worker, const Batch& batch,
                                              BatchResult& result) {
  EXPECT_TRUE(backend.Run(worker, batch, &result).ok());
  std::vector<std::vector<float>> scores(batch.num_requests());
  for (int r = 0; r < batch.num_requests(); ++r) {
    const int count = batch.candidate_begin[r + 1] - batch.candidate_begin[r];
    scores[r].assign(count, NAN);
    EXPECT_EQ(result.result_begin[r + 1] - result.result_begin[r], batch.top_k[r]);
    for (uint32_t i = result.result_begin[r]; i < result.result_begin[r + 1]; ++i) {
      const ScoredIndex& item = result.items[i];
      EXPECT_LT(item.index, static_cast<uint32_t>(count));
      if (item.index < static_cast<uint32_t>(count)) scores[r][item.index] = item.score;
      if (i > result.result_begin[r]) {  // best first, ties by lower index
        const ScoredIndex& prev = result.items[i - 1];
        EXPECT_TRUE(prev.score > item.score ||
                    (prev.score == item.score && prev.index < item.index))
            << "request " << r << " rank " << i - result.result_begin[r];
      }
    }
  }
  return scores;
}

class CpuBackendTest : public ::testing::TestWithParam<std::tuple<Interaction, DType, Variant>> {};

TEST_P(CpuBackendTest, MatchesReference) {
  const auto [interaction, dtype, variant] = GetParam();
  const uint64_t seed = 1 + static_cast<int>(interaction) * 100 + static_cast<int>(dtype) * 10 +
                        static_cast<int>(variant) * 1000;
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  TestModel test_model = MakeRandomModel(VariantSpec(interaction, dtype, variant, rng), seed);
  absl::StatusOr<std::shared_ptr<const Model>> model;
  if (dtype == DType::kInt8) {
    model = BuildInt8Model(test_model, rng);
  } else {
    UseExactTableValues(test_model, rng);
    model = BuildTestModel(test_model);
  }
  ASSERT_TRUE(model.ok()) << model.status();

  // Several requests in one batch: sizes around the tile edge, one empty request.
  std::vector<RefRequest> requests;
  for (int candidates : {1, 7, 0, 64, 65, 130}) {
    RequestShape shape;
    shape.candidates = candidates;
    shape.max_bag = candidates % 2 == 0 ? 4 : 1;
    shape.weights = candidates != 7;
    requests.push_back(RandomRequest(test_model.spec, shape, rng));
  }
  const Batch batch = MakeBatch(*model, requests);

  for (int threads : {1, 2}) {
    for (bool generic : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "threads=" << threads << " generic=" << generic);
      ForceGenericCpuPaths(generic);
      BackendOptions options;
      options.workers = 2;
      options.cpu_threads = threads;
      std::unique_ptr<Backend> backend = CreateCpuBackend(*model, options);
      BatchResult result;
      const auto scores = ScoresByIndex(*backend, 1, batch, result);
      ForceGenericCpuPaths(false);
      for (size_t r = 0; r < requests.size(); ++r) {
        for (size_t c = 0; c < requests[r].candidates.size(); ++c) {
          const double want = test::ReferenceScore(test_model, requests[r], c);
          ASSERT_FALSE(std::isnan(want)) << "reference shape mismatch";
          ASSERT_NEAR(scores[r][c], want, kTolerance) << "request " << r << " candidate " << c;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllInteractionsDtypesShapes, CpuBackendTest,
    ::testing::Combine(
        ::testing::Values(Interaction::kConcat, Interaction::kDot, Interaction::kLinear),
        ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kInt8),
        ::testing::Values(Variant::kFull, Variant::kNoDense, Variant::kNoBottom,
                          Variant::kUserDenseOnly, Variant::kItemDenseOnly, Variant::kNoUserTables,
                          Variant::kNoItemTables, Variant::kSingleLayers, Variant::kOddDims)),
    [](const auto& info) {
      const Interaction interaction = std::get<0>(info.param);
      return absl::StrCat(interaction == Interaction::kConcat ? "Concat"
                          : interaction == Interaction::kDot  ? "Dot"
                                                              : "Linear",
                          "_", DTypeLabel(std::get<1>(info.param)), "_",
                          VariantName(std::get<2>(info.param)));
    });

class CpuBackendFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(seed_);
    test_model_ =
        MakeRandomModel(VariantSpec(Interaction::kDot, DType::kF32, Variant::kFull, rng), seed_);
    absl::StatusOr<std::shared_ptr<const Model>> model = BuildTestModel(test_model_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
  }

  std::vector<RefRequest> RandomRequests(std::vector<int> sizes) {
    std::mt19937_64 rng(seed_ + 1);
    std::vector<RefRequest> requests;
    for (int size : sizes) {
      RequestShape shape;
      shape.candidates = size;
      requests.push_back(RandomRequest(test_model_.spec, shape, rng));
    }
    return requests;
  }

  const uint64_t seed_ = 77;
  TestModel test_model_;
  std::shared_ptr<const Model> model_;
};

TEST_F(CpuBackendFixture, TopKIsThePrefixOfTheFullRanking) {
  std::vector<RefRequest> requests = RandomRequests({20, 20, 20, 1, 130});
  const Batch all = MakeBatch(model_, requests);
  requests[0].top_k = 1;
  requests[1].top_k = 5;
  requests[2].top_k = 20;
  requests[3].top_k = 1;
  requests[4].top_k = 1000;  // more than the candidates: all
  const Batch some = MakeBatch(model_, requests);
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  BatchResult full, top;
  ASSERT_TRUE(backend->Run(0, all, &full).ok());
  ASSERT_TRUE(backend->Run(0, some, &top).ok());
  ASSERT_EQ(top.result_begin, (std::vector<uint32_t>{0, 1, 6, 26, 27, 157}));
  for (int r = 0; r < 5; ++r) {
    for (uint32_t i = 0; i < top.result_begin[r + 1] - top.result_begin[r]; ++i) {
      EXPECT_EQ(top.items[top.result_begin[r] + i].index,
                full.items[full.result_begin[r] + i].index);
      EXPECT_EQ(top.items[top.result_begin[r] + i].score,
                full.items[full.result_begin[r] + i].score);
    }
  }
}

TEST_F(CpuBackendFixture, EqualScoresRankByLowerIndex) {
  std::vector<RefRequest> requests = RandomRequests({6});
  for (auto& candidate : requests[0].candidates) candidate = requests[0].candidates[0];
  requests[0].candidates[3].dense[0] += 0.5f;  // one candidate differs
  requests[0].top_k = 4;
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  BatchResult result;
  ASSERT_TRUE(backend->Run(0, MakeBatch(model_, requests), &result).ok());
  ASSERT_EQ(result.items.size(), 4u);
  std::vector<ScoredIndex> tied;  // the five equal candidates, in ranking order
  for (const ScoredIndex& item : result.items) {
    if (item.index != 3) tied.push_back(item);
  }
  ASSERT_GE(tied.size(), 3u);
  for (size_t i = 0; i < tied.size(); ++i) {
    EXPECT_EQ(tied[i].index, i < 3 ? i : i + 1) << "equal scores must rank by index";
    EXPECT_EQ(tied[i].score, tied[0].score);
  }
}

TEST_F(CpuBackendFixture, FillsStagesAndDevice) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  EXPECT_EQ(backend->device(), "cpu");
  EXPECT_EQ(backend->num_workers(), 4);
  BatchResult result;
  ASSERT_TRUE(backend->Run(3, MakeBatch(model_, RandomRequests({200})), &result).ok());
  EXPECT_GT(result.stages.lookup, 0.0);
  EXPECT_GT(result.stages.cross, 0.0);
  EXPECT_GT(result.stages.dnn, 0.0);
  EXPECT_GE(result.stages.topk, 0.0);
}

TEST_F(CpuBackendFixture, EmptyBatchGivesEmptyResult) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  BatchResult result;
  Batch batch;
  batch.model = model_;
  ASSERT_TRUE(backend->Run(0, batch, &result).ok());
  EXPECT_EQ(result.result_begin, std::vector<uint32_t>{0});
  EXPECT_TRUE(result.items.empty());
}

TEST_F(CpuBackendFixture, RefusesMalformedBatches) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(model_, {});
  const Batch good = MakeBatch(model_, RandomRequests({3, 2}));
  BatchResult result;
  EXPECT_EQ(backend->Run(4, good, &result).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->Run(-1, good, &result).code(), absl::StatusCode::kInvalidArgument);
  Batch bad = good;
  bad.item.rows.push_back(0);
  EXPECT_EQ(backend->Run(0, bad, &result).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.item_dense.pop_back();
  EXPECT_EQ(backend->Run(0, bad, &result).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.top_k.pop_back();
  EXPECT_EQ(backend->Run(0, bad, &result).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.user.bag_begin.pop_back();
  EXPECT_EQ(backend->Run(0, bad, &result).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  ASSERT_FALSE(bad.item.rows.empty());
  bad.item.rows[0] = 1 << 30;  // past every table
  absl::Status status = backend->Run(0, bad, &result);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("out of range"), std::string::npos) << status;
  EXPECT_TRUE(backend->Run(0, good, &result).ok());
}

TEST_F(CpuBackendFixture, ThreadsSplitFewLargeRequestsByTiles) {
  for (std::vector<int> sizes : {std::vector<int>{300}, std::vector<int>{130, 70, 5}}) {
    const std::vector<RefRequest> requests = RandomRequests(sizes);
    const Batch batch = MakeBatch(model_, requests);
    for (int threads : {2, 3}) {
      BackendOptions options;
      options.workers = 1;
      options.cpu_threads = threads;
      std::unique_ptr<Backend> backend = CreateCpuBackend(model_, options);
      BatchResult result;
      const auto scores = ScoresByIndex(*backend, 0, batch, result);
      for (size_t r = 0; r < requests.size(); ++r) {
        for (size_t c = 0; c < requests[r].candidates.size(); ++c) {
          ASSERT_NEAR(scores[r][c], test::ReferenceScore(test_model_, requests[r], c), kTolerance)
              << "threads " << threads << " request " << r << " candidate " << c;
        }
      }
    }
  }
}

TEST_F(CpuBackendFixture, RunDoesNotAllocateAfterWarmUp) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "threads=" << threads);
    BackendOptions options;
    options.workers = 1;
    options.cpu_threads = threads;
    std::unique_ptr<Backend> backend = CreateCpuBackend(model_, options);
    const Batch large = MakeBatch(model_, RandomRequests({300, 16, 1, 70}));
    const Batch small = MakeBatch(model_, RandomRequests({16}));
    BatchResult result;
    ASSERT_TRUE(backend->Run(0, large, &result).ok());  // warm-up: sizes every buffer
    test::ScopedAllocationCounter counter;
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(backend->Run(0, small, &result).ok());
      ASSERT_TRUE(backend->Run(0, large, &result).ok());
    }
    EXPECT_EQ(counter.count(), 0);
  }
}

TEST(CpuBackendModelTest, ScoresEqualForEveryWorker) {
  std::mt19937_64 rng(9);
  TestModel test_model =
      MakeRandomModel(VariantSpec(Interaction::kConcat, DType::kF32, Variant::kFull, rng), 9);
  auto model = BuildTestModel(test_model);
  ASSERT_TRUE(model.ok()) << model.status();
  RequestShape shape;
  shape.candidates = 40;
  const Batch batch = MakeBatch(*model, {RandomRequest(test_model.spec, shape, rng)});
  BackendOptions options;
  options.workers = 3;
  std::unique_ptr<Backend> backend = CreateCpuBackend(*model, options);
  BatchResult first, other;
  ASSERT_TRUE(backend->Run(0, batch, &first).ok());
  for (int w = 1; w < 3; ++w) {
    ASSERT_TRUE(backend->Run(w, batch, &other).ok());
    ASSERT_EQ(other.items.size(), first.items.size());
    for (size_t i = 0; i < first.items.size(); ++i) {
      EXPECT_EQ(other.items[i].index, first.items[i].index);
      EXPECT_EQ(other.items[i].score, first.items[i].score);
    }
  }
}

}  // namespace
}  // namespace fuserank::engine
