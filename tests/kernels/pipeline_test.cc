// The CUDA backend end to end against the CPU backend (top-K lists) and the double
// reference (every score), tolerance 1e-5: dot / concat / linear / dcn (low and full
// rank), fp32 / fp16 / bf16 / int8,
// dims 4, 12, 100 and 128, graphs on and off, the id-reorder pass, batches of 1 and 4096
// candidates, several requests (one empty), and a 5000-candidate request (top-K on the
// host). Each batch runs twice: the second run replays the captured graph (one launch)
// and must give the same bits. Also: through the run-time loaded module, and several
// workers at once. Graph replay across batches: graph_replay_test.cc.
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend_factory.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/mlp_plan.h"
#include "gtest/gtest.h"
#include "kernels/layout_math.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/pipeline_util.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

using engine::test::RefRequest;

std::string CaseName(const ::testing::TestParamInfo<PipelineCase>& info) {
  const PipelineCase& p = info.param;
  return std::string(InteractionName(p.interaction)) + "_" + std::string(DTypeName(p.dtype)) +
         "_dim" + std::to_string(p.dim) + (p.graphs ? "_graphs" : "_nographs") +
         (p.bottom ? "" : "_nobottom") + (p.reorder ? "_reorder" : "") +
         (p.user_tables == 0 ? "_nouser" : "") + (p.item_tables == 0 ? "_noitem" : "");
}

class CudaPipelineTest : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(CudaPipelineTest, MatchesTheCpuBackendAndTheReference) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const PipelineCase p = GetParam();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const TestSetup s = MakeModel(p, seed);
  ASSERT_NE(s.model, nullptr);
  BackendOptions options;
  options.workers = 1;
  options.cuda_graphs = p.graphs;
  options.max_batch_candidates = 8192;
  CudaOptions cuda_options = TestCudaOptions();
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
                      PipelineCase{Interaction::kLinear, DType::kF16, 128, false},
                      PipelineCase{Interaction::kDcn, DType::kF32, 12, true},
                      PipelineCase{Interaction::kDcn, DType::kF16, 4, false},
                      PipelineCase{Interaction::kDcn, DType::kBF16, 100, true, false},
                      PipelineCase{Interaction::kDcn, DType::kF32, 128, true, true, false, 0, 2},
                      PipelineCase{Interaction::kDot, DType::kF32, 16, true, true, false, 0, 3},
                      PipelineCase{Interaction::kDot, DType::kBF16, 16, true, true, false, 2, 0},
                      PipelineCase{Interaction::kConcat, DType::kF32, 12, true, true, false, 0, 2},
                      PipelineCase{Interaction::kConcat, DType::kF16, 8, false, true, false, 3, 0},
                      // 51 vectors of 256: 52 KB of shared memory per warp, above the
                      // default 48 KiB (the kernel opts in to the device's limit).
                      PipelineCase{Interaction::kDot, DType::kF32, 256, true, true, false, 20, 30},
                      // int8 tables (row-wise scale and bias): vector (dims 32, 128) and
                      // element (12, 100) paths, graphs on and off, reorder.
                      PipelineCase{Interaction::kDot, DType::kInt8, 32, true},
                      PipelineCase{Interaction::kDot, DType::kInt8, 12, false, true, true},
                      PipelineCase{Interaction::kConcat, DType::kInt8, 128, true, false, true},
                      PipelineCase{Interaction::kLinear, DType::kInt8, 100, false},
                      PipelineCase{Interaction::kDcn, DType::kInt8, 16, true}),
    CaseName);

TEST(CudaModuleTest, CreateBackendLoadsTheModuleAndScoresLikeTheCpu) {
  FUSERANK_SKIP_WITHOUT_GPU();
  gpu_test::UseBuiltModule();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
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
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const TestSetup s = MakeModel({Interaction::kDot, DType::kF16, 32, true}, seed);
  ASSERT_NE(s.model, nullptr);
  constexpr int kWorkers = 4;
  constexpr int kReps = 20;
  BackendOptions options;
  options.workers = kWorkers;
  auto gpu = CudaBackend::Create(s.model, options, CudaOptions{});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = CreateCpuBackend(s.model, options);
  std::vector<std::vector<RefRequest>> requests;
  std::vector<Batch> batches;
  std::vector<BatchResult> want(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    requests.push_back(MakeRequests(s.model->spec(), {50 * (w + 1), 7}, rng));
    batches.push_back(engine::test::MakeBatch(s.model, requests.back()));
    ASSERT_TRUE(cpu->Run(0, batches.back(), &want[w]).ok());
  }
  // Every repetition's result and whether it replayed a graph, checked after the join.
  std::vector<std::vector<BatchResult>> got(kWorkers, std::vector<BatchResult>(kReps));
  std::vector<std::vector<bool>> replayed(kWorkers, std::vector<bool>(kReps));
  std::vector<absl::Status> status(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (int rep = 0; rep < kReps && status[w].ok(); ++rep) {
        status[w] = (*gpu)->Run(w, batches[w], &got[w][rep]);
        replayed[w][rep] = (*gpu)->stats(w).last_used_graph;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    SCOPED_TRACE(::testing::Message() << "worker " << w);
    ASSERT_TRUE(status[w].ok()) << status[w];
    EXPECT_EQ((*gpu)->stats(w).graph_error, "");
    EXPECT_EQ((*gpu)->stats(w).graph_capture_failures, 0u);
    for (int rep = 0; rep < kReps; ++rep) {
      SCOPED_TRACE(::testing::Message() << "repetition " << rep);
      EXPECT_EQ(replayed[w][rep], rep > 0);
      ExpectMatches(s, requests[w], batches[w], got[w][rep], want[w], 1e-5);
      if (HasFatalFailure()) return;
    }
  }
}

// Of a backend's MLP algorithms (every plan, layer and size bucket; or only those of
// `bucket` when it is not 0), how many compute in TF32 and how many cuBLASLt reported
// anything about.
struct Tf32Count {
  int tf32 = 0;
  int reported = 0;
  int total = 0;
};

Tf32Count CountTf32(const CudaBackend& backend, uint32_t bucket) {
  Tf32Count count;
  for (const auto& [name, plan] : backend.mlp_plans()) {
    for (size_t b = 0; b < plan->buckets().size(); ++b) {
      if (bucket != 0 && plan->buckets()[b] != bucket) continue;
      for (size_t l = 0; l < plan->num_layers(); ++l) {
        const AlgoChoice& choice = plan->choice(l, b);
        ++count.total;
        count.reported += choice.numerical_flags != 0 ? 1 : 0;
        count.tf32 += choice.ComputesInTf32() ? 1 : 0;
      }
    }
  }
  return count;
}

// allow_tf32 reaches cuBLASLt (its kept algorithms multiply in TF32 somewhere), never
// without it, and TF32 scores stay within 5e-3 of the CPU's. The MLP autotune is off for
// both backends: each keeps the heuristic's first algorithm that runs, one choice per GPU
// and library, so whether TF32 is in use does not turn on which algorithm timed fastest
// (cuBLASLt may propose FMA kernels, which compute the same with or without TF32 allowed).
// The scores must then differ from fp32 bit for bit where the batch's own size bucket
// runs a TF32 algorithm, which is what says the plan's choice is the one that ran.
TEST(CudaBackendTest, Tf32IsUsedOnlyWhenAllowedAndStaysClose) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const TestSetup s = MakeModel({Interaction::kConcat, DType::kF32, 128, true}, seed);
  ASSERT_NE(s.model, nullptr);
  CudaOptions cuda_options;
  cuda_options.mlp_autotune = false;
  BackendOptions options;
  options.allow_tf32 = true;
  auto tf32 = CudaBackend::Create(s.model, options, cuda_options);
  ASSERT_TRUE(tf32.ok()) << tf32.status();
  options.allow_tf32 = false;
  auto fp32 = CudaBackend::Create(s.model, options, cuda_options);
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  auto cpu = CreateCpuBackend(s.model, options);

  const Tf32Count allowed = CountTf32(**tf32, 0);
  const Tf32Count exact_plans = CountTf32(**fp32, 0);
  ::testing::Test::RecordProperty(
      "tf32_algorithms",
      absl::StrCat(allowed.tf32, " of ", allowed.total, " (", allowed.reported,
                   " reported) with allow_tf32; ", exact_plans.tf32, " without"));
  EXPECT_EQ(exact_plans.tf32, 0) << "without allow_tf32, " << exact_plans.tf32 << " of "
                                 << exact_plans.total << " MLP algorithms compute in TF32";
  // A library that reports no numerical flags leaves only the scores to tell.
  const bool flags_known = allowed.reported > 0;
  if (flags_known) {
    EXPECT_GT(allowed.tf32, 0) << "allow_tf32: none of the " << allowed.total
                               << " MLP algorithms cuBLASLt kept computes in TF32";
  }

  constexpr int kCandidates = 300;
  std::vector<RefRequest> requests = MakeRequests(s.model->spec(), {kCandidates}, rng);
  requests[0].top_k = 0;  // every candidate, so every score is compared
  const Batch batch = engine::test::MakeBatch(s.model, requests);
  BatchResult got, exact, want;
  ASSERT_TRUE((*tf32)->Run(0, batch, &got).ok());
  ASSERT_TRUE((*fp32)->Run(0, batch, &exact).ok());
  ASSERT_TRUE(cpu->Run(0, batch, &want).ok());
  ExpectMatches(s, requests, batch, got, want, 5e-3);  // TF32: 10-bit mantissa products
  ExpectMatches(s, requests, batch, exact, want, 1e-5);
  std::vector<float> tf32_score(kCandidates), fp32_score(kCandidates);
  for (const ScoredIndex& item : got.items) tf32_score[item.index] = item.score;
  for (const ScoredIndex& item : exact.items) fp32_score[item.index] = item.score;
  int differ = 0;
  for (int c = 0; c < kCandidates; ++c) differ += tf32_score[c] != fp32_score[c] ? 1 : 0;
  const Tf32Count in_bucket = CountTf32(**tf32, kernels::CandidateBucket(kCandidates));
  if (!flags_known || in_bucket.tf32 > 0) {
    EXPECT_GT(differ, 0) << "allow_tf32 gave the fp32 scores bit for bit, though " << in_bucket.tf32
                         << " of the batch's " << in_bucket.total
                         << " MLP algorithms compute in TF32"
                         << (flags_known ? "" : " (cuBLASLt reported no numerical flags)");
  } else {
    ::testing::Test::RecordProperty("tf32_in_the_batch_bucket", "none: scores not compared");
  }
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
