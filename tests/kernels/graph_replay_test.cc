// CUDA graphs of the backend's worker: a graph captured on one batch and replayed on other
// batches of its bucket, recaptured after a staging grow (and, apart, re-pointed in place
// then: CudaGraphUpdateTest), kept apart for batches that read their ids ahead and those
// that do not, and the grid-stride paths of many more requests than candidates; each batch
// checked against the CPU backend and the double reference.
#include <memory>
#include <random>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_worker.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/pipeline_util.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

using engine::test::RefRequest;

// One model on a one-worker CUDA backend (graphs on) and on the CPU backend, and batches
// of given request sizes run on both and compared.
class CudaGraphReplayTest : public ::testing::Test {
 protected:
  // Builds the model of `p` and both backends. Call through ASSERT_NO_FATAL_FAILURE.
  void Start(const PipelineCase& p, CudaOptions cuda_options = TestCudaOptions()) {
    s_ = MakeModel(p, seed_);
    ASSERT_NE(s_.model, nullptr);
    BackendOptions options;
    options.workers = 1;
    options.max_batch_candidates = 8192;
    auto gpu = CudaBackend::Create(s_.model, options, cuda_options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = *std::move(gpu);
    cpu_ = CreateCpuBackend(s_.model, options);
  }

  // Requests of exactly these candidate counts (top_k random, 0: all; bags of 0..max_bag
  // ids) on both backends; `replayed`: the GPU run must have replayed a captured graph
  // (one launch).
  void RunAndCompare(const std::vector<int>& sizes, bool replayed, int max_bag = 6) {
    const std::vector<RefRequest> requests = MakeRequests(s_.model->spec(), sizes, rng_, max_bag);
    const Batch batch = engine::test::MakeBatch(s_.model, requests);
    BatchResult want, got;
    ASSERT_TRUE(cpu_->Run(0, batch, &want).ok());
    const absl::Status ran = gpu_->Run(0, batch, &got);
    ASSERT_TRUE(ran.ok()) << ran;
    EXPECT_EQ(gpu_->stats(0).graph_error, "");
    EXPECT_EQ(gpu_->stats(0).last_used_graph, replayed);
    if (replayed) {
      EXPECT_EQ(gpu_->stats(0).last_launches, 1);
    }
    ExpectMatches(s_, requests, batch, got, want, 1e-5);
  }

  // Whether the last staging grow re-pointed the graph in place, as test properties (in
  // the XML report); CudaGraphUpdateTest requires it.
  void RecordGraphUpdate() {
    const WorkerStats& stats = gpu_->stats(0);
    RecordProperty("graphs_updated", static_cast<int>(stats.graphs_updated));
    if (!stats.graph_update_refusal.empty()) {
      RecordProperty("graph_update_refusal", stats.graph_update_refusal);
    }
  }

  const uint64_t seed_ = fuserank::testing::TestSeed();
  const ::testing::ScopedTrace trace_{__FILE__, __LINE__, fuserank::testing::SeedTrace(seed_)};
  std::mt19937_64 rng_{seed_};
  TestSetup s_;
  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<Backend> cpu_;
};

// A graph captured on one batch is replayed on other batches of the same size bucket and
// top-K shape: other ids, candidate counts and request splits. The graph reads every
// count from the staged header, so each must score like the CPU.
TEST_F(CudaGraphReplayTest, ReplaysOnOtherBatchesOfTheSameBucket) {
  FUSERANK_SKIP_WITHOUT_GPU();
  ASSERT_NO_FATAL_FAILURE(Start({Interaction::kDot, DType::kF32, 16, true}));
  // Buckets of 64 rows, the longest request 33..64 candidates (top-K shape 1).
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({3, 60}, false));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({20, 1, 40, 0}, true));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({64}, true));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({33}, true));
  EXPECT_EQ(gpu_->stats(0).graphs_captured, 1u);
}

// A batch with more ids than the staging buffer holds grows it, which leaves the worker's
// graphs pointing at the old buffers; a key that had one captures the forward pass again
// on the new buffers for the batch at hand and replays it, instead of running that batch
// eagerly. Whether the graph was re-pointed in place or instantiated anew (the fallback
// where cudaGraphExecUpdate refuses) is CudaGraphUpdateTest's (suite graph_update): here
// only the scores and the replay count, and the update is recorded as a property.
TEST_F(CudaGraphReplayTest, AStagingGrowRecapturesTheGraphForTheBatchAtHand) {
  FUSERANK_SKIP_WITHOUT_GPU();
  ASSERT_NO_FATAL_FAILURE(Start({Interaction::kDot, DType::kF32, 16, true}));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, false));  // eager, then captured
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true));
  const uint64_t grows = gpu_->stats(0).staging_grows;
  // The same key (bucket 64, one request of 40): bags of up to 900 ids, past 256 KiB.
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true, 900));
  EXPECT_EQ(gpu_->stats(0).staging_grows, grows + 1);
  EXPECT_EQ(gpu_->stats(0).graphs_captured, 2u);
  RecordGraphUpdate();
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true));  // and the new graph serves small ones
}

// With the id reorder on, a key first captured on a batch without ids holds the gather
// node too (the reorder buffer has a row from the start), so after the grow that a later
// batch of long bags causes, its graph replays on the new buffers and scores like the CPU.
TEST_F(CudaGraphReplayTest, WithTheReorderAGraphCapturedWithoutIdsReplaysAfterAGrow) {
  FUSERANK_SKIP_WITHOUT_GPU();
  CudaOptions cuda_options = TestCudaOptions();
  cuda_options.reorder_ids = true;
  ASSERT_NO_FATAL_FAILURE(Start({Interaction::kDot, DType::kF32, 16, true}, cuda_options));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, false, 0));  // empty bags: no unique rows
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true, 0));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true, 900));  // grows both buffers
  EXPECT_GE(gpu_->stats(0).staging_grows, 1u);
  RecordGraphUpdate();
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true, 3));
}

// The in-place update itself (docs/gpu.md, "Workers, buckets and graphs"): after a staging
// grow the key's instantiated graph takes the new capture's parameters
// (cudaGraphExecUpdate) rather than being instantiated anew. A refusal costs an
// instantiation, not a score (the worker falls back, and CudaGraphReplayTest checks the
// scores of the same sequence), so these tests are a suite of their own: a refusal, which
// cuBLASLt's kernels could cause with captured attributes the update does not take, reads
// as "graph_update" in the verdict, apart from any wrong score.
class CudaGraphUpdateTest : public CudaGraphReplayTest {
 protected:
  void ExpectUpdatedInPlace() {
    const WorkerStats& stats = gpu_->stats(0);
    EXPECT_EQ(stats.graphs_updated, 1u)
        << "cudaGraphExecUpdate refused to re-point the graph after a staging grow ("
        << (stats.graph_update_refusal.empty() ? "no refusal recorded" : stats.graph_update_refusal)
        << "): the worker instantiated it anew, so scores are unaffected, but the in-place "
           "update docs/gpu.md describes did not happen";
    EXPECT_EQ(stats.graph_update_refusal, "");
  }
};

TEST_F(CudaGraphUpdateTest, AStagingGrowRePointsTheGraphInPlace) {
  FUSERANK_SKIP_WITHOUT_GPU();
  ASSERT_NO_FATAL_FAILURE(Start({Interaction::kDot, DType::kF32, 16, true}));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, false));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true, 900));  // grows the staging
  ExpectUpdatedInPlace();
}

// cudaGraphExecUpdate refuses another node count: a graph captured on a batch without ids
// still holds the gather node (the reorder buffer has a row from the start), so it can be
// re-pointed.
TEST_F(CudaGraphUpdateTest, WithTheReorderAGraphCapturedWithoutIdsIsRePointedInPlace) {
  FUSERANK_SKIP_WITHOUT_GPU();
  CudaOptions cuda_options = TestCudaOptions();
  cuda_options.reorder_ids = true;
  ASSERT_NO_FATAL_FAILURE(Start({Interaction::kDot, DType::kF32, 16, true}, cuda_options));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, false, 0));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true, 0));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true, 900));  // grows both buffers
  ExpectUpdatedInPlace();
}

// One-id bags of fp32 rows read their ids ahead (kernels::LookupArgs::prefetch_ids; here
// from any batch size), longer bags do not: a bucket's graphs for the two are apart, each
// captured once and replayed.
TEST_F(CudaGraphReplayTest, OneIdAndLongerBagsOfOneBucketReplayGraphsOfTheirOwn) {
  FUSERANK_SKIP_WITHOUT_GPU();
  CudaOptions cuda_options = TestCudaOptions();
  cuda_options.prefetch_min_ids = 0;
  ASSERT_NO_FATAL_FAILURE(Start({Interaction::kDot, DType::kF32, 16, true}, cuda_options));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, false, 1));  // bags of 0 or 1 id: prefetch
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true, 1));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, false, 6));  // about 3 ids a bag: no prefetch
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true, 6));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare({40}, true, 1));
  EXPECT_EQ(gpu_->stats(0).graphs_captured, 2u);
}

// Stage events on a sampled share of replays (CudaOptions::stage_sample_period): each key
// keeps a graph with the event nodes and one without; one batch in four per worker replays
// the first and reports its stages, the others the second and leave them untimed; both
// score like the CPU.
TEST_F(CudaGraphReplayTest, OneReplayInFourReportsItsStages) {
  FUSERANK_SKIP_WITHOUT_GPU();
  CudaOptions cuda_options = TestCudaOptions();
  cuda_options.stage_sample_period = 4;
  ASSERT_NO_FATAL_FAILURE(Start({Interaction::kDot, DType::kF32, 16, true}, cuda_options));
  for (int i = 0; i < 10; ++i) {
    SCOPED_TRACE(::testing::Message() << "batch " << i);
    const std::vector<RefRequest> requests = MakeRequests(s_.model->spec(), {30, 9}, rng_);
    const Batch batch = engine::test::MakeBatch(s_.model, requests);
    BatchResult want, got;
    ASSERT_TRUE(cpu_->Run(0, batch, &want).ok());
    ASSERT_TRUE(gpu_->Run(0, batch, &got).ok());
    ExpectMatches(s_, requests, batch, got, want, 1e-5);
    const bool replayed = i > 0;
    EXPECT_EQ(gpu_->stats(0).last_used_graph, replayed);
    const bool timed = !replayed || i % 4 == 0;  // eager, or a sampled replay
    EXPECT_EQ(got.stages.timed, timed);
    if (timed) {
      EXPECT_GT(got.stages.lookup, 0.0);
      EXPECT_GT(got.stages.dnn, 0.0);
      EXPECT_GT(got.stages.topk, 0.0);
    }
    EXPECT_GT(gpu_->stats(0).last_device_seconds, 0.0);
  }
  EXPECT_EQ(gpu_->stats(0).graphs_captured, 1u);  // one key, both variants
}

TEST(PrefetchIdsTest, Fp32RowsInBagsOfAboutOneIdInLargeBatches) {
  kernels::PackedHeader h;
  h.num_item_bags = 100;
  h.num_user_bags = 4;
  h.num_item_ids = 100;
  h.num_user_ids = 30;  // 130 ids in 104 bags: 1.25 a bag
  EXPECT_TRUE(PrefetchIds(kernels::RowType::kF32, h, 130));
  EXPECT_FALSE(PrefetchIds(kernels::RowType::kF32, h, 131));  // too few ids
  EXPECT_FALSE(PrefetchIds(kernels::RowType::kF32, h, kPrefetchMinIds));
  EXPECT_FALSE(PrefetchIds(kernels::RowType::kF16, h, 0));
  EXPECT_FALSE(PrefetchIds(kernels::RowType::kBF16, h, 0));
  EXPECT_FALSE(PrefetchIds(kernels::RowType::kInt8, h, 0));
  h.num_user_ids = 31;
  EXPECT_FALSE(PrefetchIds(kernels::RowType::kF32, h, 0));
  h.num_item_bags = 18 * 4096;  // the bench model's 4096 candidates, one id each
  h.num_item_ids = 18 * 4096;
  h.num_user_bags = 8;
  h.num_user_ids = 8;
  EXPECT_TRUE(PrefetchIds(kernels::RowType::kF32, h, kPrefetchMinIds));
}

// More requests than candidates (the bucket follows the requests), and more than 4096
// requests in one batch (the top-K kernel's grid-stride loop over requests).
TEST_F(CudaGraphReplayTest, ManyMoreRequestsThanCandidates) {
  FUSERANK_SKIP_WITHOUT_GPU();
  ASSERT_NO_FATAL_FAILURE(Start({Interaction::kConcat, DType::kF16, 12, true}));
  std::vector<int> sparse(40, 0);
  sparse[3] = 2;
  sparse[17] = 1;
  sparse[39] = 5;
  ASSERT_NO_FATAL_FAILURE(RunAndCompare(sparse, false));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare(sparse, true));
  std::vector<int> many(5000, 1);
  many[4999] = 3;
  ASSERT_NO_FATAL_FAILURE(RunAndCompare(many, false));
  ASSERT_NO_FATAL_FAILURE(RunAndCompare(many, true));
}

}  // namespace
}  // namespace fuserank::engine::cuda
