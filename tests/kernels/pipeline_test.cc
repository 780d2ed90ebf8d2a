// The CUDA backend end to end against the CPU backend (top-K lists) and the double
// reference (every score), tolerance 1e-5: dot / concat / linear, fp32 / fp16 / bf16,
// dims 4, 12, 100 and 128, graphs on and off, the id-reorder pass, batches of 1 and 4096
// candidates, several requests (one empty), and a 5000-candidate request (top-K on the
// host). Each batch runs twice: the second run replays the captured graph (one launch)
// and must give the same bits. Also: through the run-time loaded module, and several
// workers at once.
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend_factory.h"
#include "engine/cpu_backend.h"
#include "engine/cuda/cuda_backend.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu_reference_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine::cuda {
namespace {

using engine::test::RefRequest;

struct PipelineCase {
  Interaction interaction;
  DType dtype;
  int dim;
  bool graphs;
  bool bottom = true;
  bool reorder = false;
};

std::string CaseName(const ::testing::TestParamInfo<PipelineCase>& info) {
  const PipelineCase& p = info.param;
  return std::string(InteractionName(p.interaction)) + "_" + std::string(DTypeName(p.dtype)) +
         "_dim" + std::to_string(p.dim) + (p.graphs ? "_graphs" : "_nographs") +
         (p.bottom ? "" : "_nobottom") + (p.reorder ? "_reorder" : "");
}

struct TestSetup {
  fuserank::testing::TestModel test_model;
  std::shared_ptr<const Model> model;
};

TestSetup MakeModel(const PipelineCase& p, uint64_t seed) {
  ModelSpec spec = fuserank::testing::SmallSpec(2, 3, 1000, p.dim);
  std::swap(spec.tables[1], spec.tables[3]);  // user, item, item, user, item
  spec.tables[2].pooling = Pooling::kMean;
  spec.embedding_dtype = p.dtype;
  spec.interaction = p.interaction;
  if (p.interaction == Interaction::kLinear) spec.cross_dim = 24;
  if (!p.bottom) {
    spec.bottom_mlp.clear();
    if (p.interaction == Interaction::kDot) {
      spec.dense_user = p.dim / 2;
      spec.dense_item = p.dim - p.dim / 2;
    }
  }
  spec.top_mlp = {32, 16, 1};
  TestSetup s;
  s.test_model = fuserank::testing::MakeRandomModel(spec, seed);
  auto model = fuserank::testing::BuildTestModel(s.test_model);
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) s.model = *model;
  return s;
}

std::vector<RefRequest> MakeRequests(const ModelSpec& spec, const std::vector<int>& sizes,
                                     std::mt19937_64& rng) {
  std::vector<RefRequest> requests;
  for (int n : sizes) {
    engine::test::RequestShape shape;
    shape.candidates = n;
    shape.max_bag = 6;
    requests.push_back(engine::test::RandomRequest(spec, shape, rng));
    requests.back().top_k = static_cast<uint32_t>(rng() % (n + 2));  // 0: all
  }
  return requests;
}

// Checks `got` against the CPU backend's result and the reference scores.
void ExpectMatches(const TestSetup& s, const std::vector<RefRequest>& requests, const Batch& batch,
                   const BatchResult& got, const BatchResult& cpu, double tolerance) {
  ASSERT_EQ(got.result_begin, cpu.result_begin);
  ASSERT_EQ(got.items.size(), cpu.items.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    std::vector<float> score_of(requests[r].candidates.size());
    for (size_t c = 0; c < score_of.size(); ++c) {
      score_of[c] = static_cast<float>(
          engine::test::ReferenceScore(s.test_model, requests[r], static_cast<int>(c)));
    }
    const uint32_t b = got.result_begin[r];
    gpu_test::ExpectSameTopK(got.items.data() + b, cpu.items.data() + b,
                             got.result_begin[r + 1] - b, score_of, tolerance,
                             "request " + std::to_string(r));
  }
}

class CudaPipelineTest : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(CudaPipelineTest, MatchesTheCpuBackendAndTheReference) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const PipelineCase p = GetParam();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const TestSetup s = MakeModel(p, seed);
  ASSERT_NE(s.model, nullptr);
  BackendOptions options;
  options.workers = 1;
  options.cuda_graphs = p.graphs;
  options.max_batch_candidates = 8192;
  CudaOptions cuda_options;
  cuda_options.reorder_ids = p.reorder;
  auto gpu = CudaBackend::Create(s.model, options, cuda_options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = CreateCpuBackend(s.model, options);
  for (const std::vector<int>& sizes :
       {std::vector<int>{1}, std::vector<int>{4096}, std::vector<int>{3, 0, 17, 250},
        std::vector<int>{1}, std::vector<int>{5000, 2}}) {
    SCOPED_TRACE(::testing::Message() << "first request of " << sizes[0] << " candidates");
    const std::vector<RefRequest> requests = MakeRequests(s.model->spec(), sizes, rng);
    const Batch batch = engine::test::MakeBatch(s.model, requests);
    BatchResult want;
    ASSERT_TRUE(cpu->Run(0, batch, &want).ok());
    BatchResult first, second;
    ASSERT_TRUE((*gpu)->Run(0, batch, &first).ok());
    ExpectMatches(s, requests, batch, first, want, 1e-5);
    ASSERT_TRUE((*gpu)->Run(0, batch, &second).ok());
    const WorkerStats& stats = (*gpu)->stats(0);
    EXPECT_EQ(stats.graph_error, "");
    if (p.graphs) {
      EXPECT_TRUE(stats.last_used_graph);
      EXPECT_EQ(stats.last_launches, 1);
    } else {
      EXPECT_FALSE(stats.last_used_graph);
      EXPECT_GE(stats.last_launches, 4);
    }
    ASSERT_EQ(second.items.size(), first.items.size());
    for (size_t i = 0; i < first.items.size(); ++i) {
      ASSERT_EQ(second.items[i].index, first.items[i].index) << i;
      ASSERT_EQ(second.items[i].score, first.items[i].score) << i;
    }
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaPipelineTest,
    ::testing::Values(PipelineCase{Interaction::kDot, DType::kF32, 32, true},
                      PipelineCase{Interaction::kDot, DType::kF32, 32, false},
                      PipelineCase{Interaction::kDot, DType::kF16, 4, true},
                      PipelineCase{Interaction::kDot, DType::kBF16, 12, false},
                      PipelineCase{Interaction::kDot, DType::kF32, 100, true, false},
                      PipelineCase{Interaction::kDot, DType::kF32, 128, true, true, true},
                      PipelineCase{Interaction::kConcat, DType::kF32, 12, true},
                      PipelineCase{Interaction::kConcat, DType::kBF16, 128, false, false},
                      PipelineCase{Interaction::kConcat, DType::kF16, 100, true, true, true},
                      PipelineCase{Interaction::kLinear, DType::kF32, 4, true},
                      PipelineCase{Interaction::kLinear, DType::kF16, 128, false}),
    CaseName);

TEST(CudaModuleTest, CreateBackendLoadsTheModuleAndScoresLikeTheCpu) {
  FUSERANK_SKIP_WITHOUT_GPU();
  gpu_test::UseBuiltModule();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const TestSetup s = MakeModel({Interaction::kDot, DType::kF32, 16, true}, seed);
  ASSERT_NE(s.model, nullptr);
  BackendOptions options;
  auto gpu = CreateBackend(s.model, DeviceChoice::kCuda, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->device(), "cuda:0");
  auto automatic = CreateBackend(s.model, DeviceChoice::kAuto, options);
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ((*automatic)->device(), "cuda:0");
  auto cpu = CreateCpuBackend(s.model, options);
  const std::vector<RefRequest> requests = MakeRequests(s.model->spec(), {3, 40, 256}, rng);
  const Batch batch = engine::test::MakeBatch(s.model, requests);
  BatchResult got, want;
  ASSERT_TRUE((*gpu)->Run(0, batch, &got).ok());
  ASSERT_TRUE(cpu->Run(0, batch, &want).ok());
  ExpectMatches(s, requests, batch, got, want, 1e-5);
}

TEST(CudaBackendTest, WorkersRunConcurrently) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const TestSetup s = MakeModel({Interaction::kDot, DType::kF16, 32, true}, seed);
  ASSERT_NE(s.model, nullptr);
  BackendOptions options;
  options.workers = 4;
  auto gpu = CudaBackend::Create(s.model, options, CudaOptions{});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = CreateCpuBackend(s.model, options);
  std::vector<std::vector<RefRequest>> requests;
  std::vector<Batch> batches;
  std::vector<BatchResult> want(4), got(4);
  for (int w = 0; w < 4; ++w) {
    requests.push_back(MakeRequests(s.model->spec(), {50 * (w + 1), 7}, rng));
    batches.push_back(engine::test::MakeBatch(s.model, requests.back()));
    ASSERT_TRUE(cpu->Run(0, batches.back(), &want[w]).ok());
  }
  std::vector<absl::Status> status(4);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int rep = 0; rep < 20 && status[w].ok(); ++rep) {
        status[w] = (*gpu)->Run(w, batches[w], &got[w]);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < 4; ++w) {
    ASSERT_TRUE(status[w].ok()) << status[w];
    ExpectMatches(s, requests[w], batches[w], got[w], want[w], 1e-5);
  }
}

TEST(CudaBackendTest, Tf32IsUsedOnlyWhenAllowedAndStaysClose) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const TestSetup s = MakeModel({Interaction::kConcat, DType::kF32, 128, true}, seed);
  ASSERT_NE(s.model, nullptr);
  BackendOptions options;
  options.allow_tf32 = true;
  auto gpu = CudaBackend::Create(s.model, options, CudaOptions{});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = CreateCpuBackend(s.model, options);
  const std::vector<RefRequest> requests = MakeRequests(s.model->spec(), {300}, rng);
  const Batch batch = engine::test::MakeBatch(s.model, requests);
  BatchResult got, want;
  ASSERT_TRUE((*gpu)->Run(0, batch, &got).ok());
  ASSERT_TRUE(cpu->Run(0, batch, &want).ok());
  ExpectMatches(s, requests, batch, got, want, 5e-3);  // TF32: 10-bit mantissa products
}

TEST(CudaBackendTest, RefusesABatchOfAnotherModelOrWorker) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const TestSetup s = MakeModel({Interaction::kDot, DType::kF32, 8, true}, 1);
  const TestSetup other = MakeModel({Interaction::kDot, DType::kF32, 8, true}, 2);
  ASSERT_NE(s.model, nullptr);
  auto gpu = CudaBackend::Create(s.model, BackendOptions{}, CudaOptions{});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::mt19937_64 rng(3);
  Batch batch = engine::test::MakeBatch(other.model, MakeRequests(s.model->spec(), {4}, rng));
  BatchResult result;
  EXPECT_EQ((*gpu)->Run(0, batch, &result).code(), absl::StatusCode::kInvalidArgument);
  batch.model = s.model;
  EXPECT_EQ((*gpu)->Run(99, batch, &result).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*gpu)->Run(0, batch, &result).ok());
}

TEST(CudaBackendTest, WithoutAGpuCreationSaysWhy) {
  if (gpu_test::NoGpuReason().empty()) GTEST_SKIP() << "a GPU is present";
  const TestSetup s = MakeModel({Interaction::kDot, DType::kF32, 8, true}, 1);
  ASSERT_NE(s.model, nullptr);
  auto gpu = CudaBackend::Create(s.model, BackendOptions{}, CudaOptions{});
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(gpu.status().message().find("no usable CUDA device"), std::string::npos)
      << gpu.status();
}

}  // namespace
}  // namespace fuserank::engine::cuda
