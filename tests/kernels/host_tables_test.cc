// cache.placement: host on the GPU: the tables in mapped host memory (1,000 rows each, a
// hot-row cache of at most 512), the hot rows in the device cache the lookup probes. The
// scores equal those of the same model with its tables in device memory bit for bit, before
// and after hot-row swaps, eager and replayed from a graph; the device's hit and miss counts
// equal the CPU engine's for the same batch and hot set.
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/pipeline_util.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

using engine::test::RefRequest;

constexpr int kHotCapacity = 512;

struct HostCase {
  DType dtype;
  int dim;
  bool graphs;
};

class CudaHostTablesTest : public ::testing::TestWithParam<HostCase> {
 protected:
  // The model on a CUDA backend with device tables, one with host tables and a hot-row
  // cache fed by manager_, and the CPU backend reading the same manager_.
  void Start() {
    const HostCase& c = GetParam();
    s_ = MakeModel({Interaction::kDot, c.dtype, c.dim, c.graphs}, seed_);
    ASSERT_NE(s_.model, nullptr);
    HotRowOptions hot;
    hot.capacity = kHotCapacity;
    hot.sketches = false;
    auto manager = HotRowManager::Create(s_.model, hot);
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    BackendOptions options;
    options.workers = 1;
    options.max_batch_candidates = 2048;
    options.cuda_graphs = c.graphs;
    // Both backends on the cuBLASLt heuristic's first algorithms: timed choices could differ
    // between them, and with them the scores' last bits.
    CudaOptions cuda_options;
    cuda_options.mlp_autotune = false;
    auto device = CudaBackend::Create(s_.model, options, cuda_options);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *std::move(device);
    options.hot_rows = manager_.get();
    options.host_tables = true;
    cuda_options.hot_count_interval = absl::ZeroDuration();  // counts read after every batch
    auto host = CudaBackend::Create(s_.model, options, cuda_options);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
    cpu_ = CreateCpuBackend(s_.model, options);
  }

  // Every table's hot set: raw ids first .. first + count - 1.
  void SetHotRows(int64_t first, int count) {
    std::vector<int64_t> ids(count);
    std::iota(ids.begin(), ids.end(), first);
    std::vector<TableIds> tables;
    for (const EmbeddingTable& t : s_.model->tables()) tables.push_back({t.name, ids});
    auto set = manager_->Set(tables);
    ASSERT_TRUE(set.ok()) << set.status();
    // The device cache takes the swap off the request path: wait for it (the updater
    // looks every 100 ms; a batch would wake it at once).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (host_->hot_cache_version() != set->version &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(host_->hot_cache_version(), set->version);
  }

  std::vector<TableHotRowsStatus> Counts() {
    auto status = manager_->Get({});
    EXPECT_TRUE(status.ok()) << status.status();
    return status.ok() ? status->tables : std::vector<TableHotRowsStatus>{};
  }

  // One batch on the three backends: the host-table scores must equal the device-table
  // scores bit for bit (and the reference within 1e-5), and the device's hit and miss
  // counts the CPU engine's. Returns the batch's hits over all tables.
  uint64_t RunAndCompare(const std::vector<int>& sizes, bool replayed) {
    const std::vector<RefRequest> requests = MakeRequests(s_.model->spec(), sizes, rng_);
    const Batch batch = engine::test::MakeBatch(s_.model, requests);
    BatchResult want, got, cpu;
    EXPECT_TRUE(device_->Run(0, batch, &want).ok());
    const std::vector<TableHotRowsStatus> before = Counts();
    const absl::Status ran = host_->Run(0, batch, &got);
    EXPECT_TRUE(ran.ok()) << ran;
    const std::vector<TableHotRowsStatus> gpu_counts = Counts();
    EXPECT_TRUE(cpu_->Run(0, batch, &cpu).ok());
    const std::vector<TableHotRowsStatus> after = Counts();
    EXPECT_EQ(host_->stats(0).last_used_graph, replayed);
    EXPECT_EQ(got.result_begin, want.result_begin);
    EXPECT_EQ(got.items.size(), want.items.size());
    for (size_t i = 0; i < std::min(got.items.size(), want.items.size()); ++i) {
      EXPECT_EQ(got.items[i].index, want.items[i].index) << "item " << i;
      EXPECT_EQ(std::memcmp(&got.items[i].score, &want.items[i].score, sizeof(float)), 0)
          << "item " << i << ": " << got.items[i].score << " vs " << want.items[i].score;
    }
    ExpectMatches(s_, requests, batch, got, cpu, 1e-5);
    uint64_t hits = 0;
    for (size_t t = 0; t < after.size(); ++t) {
      SCOPED_TRACE(after[t].table);
      const uint64_t gpu_hits = gpu_counts[t].hits - before[t].hits;
      const uint64_t gpu_misses = gpu_counts[t].misses - before[t].misses;
      EXPECT_EQ(gpu_hits, after[t].hits - gpu_counts[t].hits);
      EXPECT_EQ(gpu_misses, after[t].misses - gpu_counts[t].misses);
      hits += gpu_hits;
    }
    return hits;
  }

  const uint64_t seed_ = fuserank::testing::TestSeed();
  const ::testing::ScopedTrace trace_{__FILE__, __LINE__, fuserank::testing::SeedTrace(seed_)};
  std::mt19937_64 rng_{seed_};
  TestSetup s_;
  std::unique_ptr<HotRowManager> manager_;
  std::unique_ptr<CudaBackend> device_;
  std::unique_ptr<CudaBackend> host_;
  std::unique_ptr<Backend> cpu_;
};

TEST_P(CudaHostTablesTest, ScoresEqualDeviceTablesBitForBitAcrossHotRowSwaps) {
  FUSERANK_SKIP_WITHOUT_GPU();
  ASSERT_NO_FATAL_FAILURE(Start());
  const bool graphs = GetParam().graphs;
  // No hot rows yet: every row read over the bus, every lookup a miss.
  EXPECT_EQ(RunAndCompare({40, 7}, false), 0u);
  // The same key (bucket 64, top-K shape 1: the longest request 33..64): a replay.
  EXPECT_EQ(RunAndCompare({23, 40}, graphs), 0u);
  // Half of each table hot: the batch hits the cache and scores the same.
  ASSERT_NO_FATAL_FAILURE(SetHotRows(0, kHotCapacity));
  EXPECT_GT(RunAndCompare({40, 7}, graphs), 0u);
  // Another set, swapped under the same graph.
  ASSERT_NO_FATAL_FAILURE(SetHotRows(250, 300));
  EXPECT_GT(RunAndCompare({12, 50}, graphs), 0u);
  // A bigger batch (another bucket, eager the first time).
  EXPECT_GT(RunAndCompare({300, 200, 5}, false), 0u);
  // Emptied again: all misses.
  ASSERT_NO_FATAL_FAILURE(SetHotRows(0, 0));
  EXPECT_EQ(RunAndCompare({40, 7}, graphs), 0u);
  EXPECT_EQ(host_->stats(0).graph_error, "");
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaHostTablesTest,
                         ::testing::Values(HostCase{DType::kF32, 16, true},
                                           HostCase{DType::kF32, 12, false},
                                           HostCase{DType::kF16, 32, true},
                                           HostCase{DType::kInt8, 16, true}),
                         [](const ::testing::TestParamInfo<HostCase>& info) {
                           return std::string(DTypeName(info.param.dtype)) + "_dim" +
                                  std::to_string(info.param.dim) +
                                  (info.param.graphs ? "_graphs" : "_eager");
                         });

TEST(CudaHostTablesRefusalTest, TheIdReorderIsRefusedWithHostTables) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const TestSetup s = MakeModel({Interaction::kDot, DType::kF32, 16, true}, 3);
  ASSERT_NE(s.model, nullptr);
  BackendOptions options;
  options.host_tables = true;
  CudaOptions cuda_options;
  cuda_options.reorder_ids = true;
  auto created = CudaBackend::Create(s.model, options, cuda_options);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(created.status().message().find("cache.placement: host"), std::string::npos)
      << created.status();
}

}  // namespace
}  // namespace fuserank::engine::cuda
