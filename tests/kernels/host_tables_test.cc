// cache.placement: host on the GPU: the tables in mapped host memory (1,000 rows each, a
// hot-row cache of at most 512), the hot rows in the device cache the lookup probes. The
// scores equal those of the same model with its tables in device memory bit for bit, before
// and after hot-row swaps, eager and replayed from a graph; the device's hit and miss counts
// equal the CPU engine's for the same batch and hot set. And one lookup launch whose device
// cache holds rows that differ from the table's (each value + 1000): hot ids must pool the
// cache's values and cold ids the table's (the bit copies of the backend tests cannot tell a
// kernel that probes the cache but reads the host row from one that reads the cached row).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_lookup.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_model.h"
#include "engine/cuda/gpu_layout.h"
#include "engine/cuda/hot_cache_image.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "engine/hot_rows/hot_rows.h"
#include "gtest/gtest.h"
#include "kernels/hot_cache.h"
#include "kernels/layout_math.h"
#include "kernels/lookup.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/pipeline_util.h"
#include "tests/testing/test_model.h"
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
  // cache fed by manager_ (its counters read back every `hot_count_interval`; 0: after
  // every batch), and the CPU backend reading the same manager_.
  void Start(absl::Duration hot_count_interval = absl::ZeroDuration()) {
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
    cuda_options.hot_count_interval = hot_count_interval;
    auto host = CudaBackend::Create(s_.model, options, cuda_options);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
    cpu_ = CreateCpuBackend(s_.model, options);
  }

  // Every table's hot set (`only`: the table of that index alone; the others keep theirs
  // and their device buffers): raw ids first .. first + count - 1.
  void SetHotRows(int64_t first, int count, int only = -1) {
    std::vector<int64_t> ids(count);
    std::iota(ids.begin(), ids.end(), first);
    std::vector<TableIds> tables;
    for (size_t t = 0; t < s_.model->tables().size(); ++t) {
      if (only < 0 || static_cast<size_t>(only) == t) {
        tables.push_back({s_.model->tables()[t].name, ids});
      }
    }
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
  // One table's set swapped: the others' cached rows are shared by the new generation.
  ASSERT_NO_FATAL_FAILURE(SetHotRows(600, 100, /*only=*/0));
  EXPECT_GT(RunAndCompare({300, 200, 5}, graphs), 0u);
  // Emptied again: all misses.
  ASSERT_NO_FATAL_FAILURE(SetHotRows(0, 0));
  EXPECT_EQ(RunAndCompare({40, 7}, graphs), 0u);
  EXPECT_EQ(host_->stats(0).graph_error, "");
}

TEST_P(CudaHostTablesTest, AFlushHandsOverTheCountsNotReadBackYet) {
  FUSERANK_SKIP_WITHOUT_GPU();
  ASSERT_NO_FATAL_FAILURE(Start(absl::Hours(1)));  // as the warm-up's batches: none read back
  ASSERT_NO_FATAL_FAILURE(SetHotRows(0, kHotCapacity));
  const std::vector<RefRequest> requests = MakeRequests(s_.model->spec(), {40, 7}, rng_);
  const Batch batch = engine::test::MakeBatch(s_.model, requests);
  BatchResult got, cpu;
  const std::vector<TableHotRowsStatus> before = Counts();
  ASSERT_TRUE(host_->Run(0, batch, &got).ok());
  const std::vector<TableHotRowsStatus> unread = Counts();
  host_->FlushLookupCounts();
  const std::vector<TableHotRowsStatus> flushed = Counts();
  ASSERT_TRUE(cpu_->Run(0, batch, &cpu).ok());
  const std::vector<TableHotRowsStatus> after = Counts();
  uint64_t hits = 0;
  for (size_t t = 0; t < after.size(); ++t) {
    SCOPED_TRACE(after[t].table);
    EXPECT_EQ(unread[t].hits, before[t].hits) << "read back before the interval";
    EXPECT_EQ(unread[t].misses, before[t].misses) << "read back before the interval";
    EXPECT_EQ(flushed[t].hits - before[t].hits, after[t].hits - flushed[t].hits);
    EXPECT_EQ(flushed[t].misses - before[t].misses, after[t].misses - flushed[t].misses);
    hits += flushed[t].hits - before[t].hits;
  }
  EXPECT_GT(hits, 0u);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaHostTablesTest,
                         ::testing::Values(HostCase{DType::kF32, 16, true},
                                           HostCase{DType::kF32, 12, false},
                                           HostCase{DType::kF16, 32, true},
                                           HostCase{DType::kInt8, 16, true},
                                           HostCase{DType::kInt8, 12, false}),
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

// One LaunchPooledLookup with a hot-row cache, tables in mapped host memory as the backend
// places them. The cache is built from a second model whose hot rows are the first's + 1000,
// so the expected pooled values are the CPU lookup over that second model: a hot id read
// from the host table instead of the cache is off by 1000 x its weight.
TEST(CudaHostTablesLaunchTest, HotIdsPoolTheCachedRowsAndColdIdsTheTableRows) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  constexpr int kRows = 1000;
  ModelSpec spec = fuserank::testing::SmallSpec(2, 3, kRows, 12);
  spec.embedding_dtype = DType::kF32;
  spec.tables[1].pooling = Pooling::kMean;
  spec.tables[4].pooling = Pooling::kMean;
  const fuserank::testing::TestModel plain = fuserank::testing::MakeRandomModel(spec, seed);
  // Every third row hot, in every table; the cached copy of a hot row is its values + 1000
  // (exact in fp32: the table values are multiples of 1/256 in [-0.5, 0.5]).
  std::vector<int32_t> hot_rows;
  for (int32_t row = 0; row < kRows; row += 3) hot_rows.push_back(row);
  fuserank::testing::TestModel cached = plain;
  for (const TableSpec& t : spec.tables) {
    std::vector<float>& w = cached.weights.at(absl::StrCat("embeddings.", t.name, ".weight"));
    for (const int32_t row : hot_rows) {
      for (int e = 0; e < t.dim; ++e) w[static_cast<size_t>(row) * t.dim + e] += 1000.0f;
    }
  }
  auto model_or = fuserank::testing::BuildTestModel(plain);
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  auto cached_or = fuserank::testing::BuildTestModel(cached);
  ASSERT_TRUE(cached_or.ok()) << cached_or.status();
  const std::shared_ptr<const Model> model = *model_or;
  const std::shared_ptr<const Model> cached_model = *cached_or;
  auto layout_or = ComputeGpuLayout(*model);
  ASSERT_TRUE(layout_or.ok()) << layout_or.status();
  const GpuLayout& g = *layout_or;
  auto dm = DeviceModel::Upload(*model, g, /*host_tables=*/true);
  ASSERT_TRUE(dm.ok()) << dm.status();

  // The device cache of each lookup table (d_tables order), from the cached model's rows.
  const int tables = g.user_tables + g.item_tables;
  std::vector<std::shared_ptr<const HotSet>> sets;
  std::vector<DeviceBuffer> buffers;  // each table's index and rows
  std::vector<kernels::HotCacheTable> hot;
  for (int k = 0; k < tables; ++k) {
    const EmbeddingTable& t = cached_model->tables()[g.lookup_spec_index[k]];
    auto set = HotSet::FromRows(t, hot_rows, kRows);
    ASSERT_TRUE(set.ok()) << set.status();
    sets.push_back(*set);
    const HotCacheImage image = MakeHotCacheImage(t, **set);
    ASSERT_EQ(image.count, static_cast<int>(hot_rows.size()));
    DeviceBuffer& d_index = buffers.emplace_back(gpu_test::Upload(image.index));
    DeviceBuffer& d_rows = buffers.emplace_back(gpu_test::Upload(image.rows));
    hot.push_back(image.Table(d_index.get<kernels::HotCacheEntry>(), d_rows.get<unsigned char>()));
  }
  DeviceBuffer d_hot = gpu_test::Upload(hot);
  DeviceBuffer d_counts = gpu_test::Upload(std::vector<unsigned long long>(2 * tables, 0));
  ASSERT_FALSE(HasFailure());

  std::vector<test::RefRequest> requests;
  for (int n : {300, 1, 0, 41, 7, 64, 2, 16}) {
    engine::test::RequestShape shape;
    shape.candidates = n;
    shape.max_bag = 5;
    requests.push_back(engine::test::RandomRequest(spec, shape, rng));
  }
  const Batch batch = engine::test::MakeBatch(model, requests);
  BatchPacker packer(MakePackInfo(*model), /*reorder=*/false);
  auto h = packer.Plan(batch);
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<unsigned char> packed(h->total_bytes);
  packer.Write(batch, *h, packed.data());
  DeviceBuffer d_batch = gpu_test::Upload(packed);
  const uint32_t n = h->num_candidates;
  const uint32_t r = h->num_requests;

  // Expected: the CPU lookup over the cached model (hot rows + 1000, cold rows the
  // table's), and over the plain model to show the launch is told apart from it; the ids
  // of each table read from its cache and the others.
  std::vector<float> want_user(size_t{r} * g.user_ld, 0.0f), plain_user = want_user;
  std::vector<float> want_item(size_t{n} * g.item_ld, 0.0f), plain_item = want_item;
  std::vector<unsigned long long> want_counts(2 * tables, 0);
  std::vector<std::pair<int, int>> user_cols, item_cols;
  for (int k = 0; k < tables; ++k) {
    const bool user = k < g.user_tables;
    const int i = user ? k : k - g.user_tables;
    const int stride = user ? g.user_tables : g.item_tables;
    const uint32_t bags = user ? r : n;
    const BagSet& bag_set = user ? batch.user : batch.item;
    const int ld = user ? g.user_ld : g.item_ld;
    const int col = g.lookup[k].out_col;
    const int spec_index = g.lookup_spec_index[k];
    PooledLookup(cached_model->tables()[spec_index], bag_set, i, stride, bags,
                 (user ? want_user : want_item).data() + col, ld);
    PooledLookup(model->tables()[spec_index], bag_set, i, stride, bags,
                 (user ? plain_user : plain_item).data() + col, ld);
    (user ? user_cols : item_cols).push_back({col, model->tables()[spec_index].dim});
    for (uint32_t b = 0; b < bags; ++b) {
      const size_t bag = size_t{b} * stride + i;
      for (uint32_t j = bag_set.bag_begin[bag]; j < bag_set.bag_begin[bag + 1]; ++j) {
        ++want_counts[2 * k + (sets[k]->FindSlot(bag_set.rows[j]) >= 0 ? 0 : 1)];
      }
    }
  }
  unsigned long long hot_ids = 0, cold_ids = 0;
  for (int k = 0; k < tables; ++k) {
    hot_ids += want_counts[2 * k];
    cold_ids += want_counts[2 * k + 1];
  }
  ASSERT_GT(hot_ids, 0u) << "the batch has no hot id";
  ASSERT_GT(cold_ids, 0u) << "the batch has no cold id";

  DeviceBuffer d_user = gpu_test::Poisoned(want_user.size() * sizeof(float));
  DeviceBuffer d_item = gpu_test::Poisoned(want_item.size() * sizeof(float));
  kernels::LookupArgs a;
  a.d_batch = d_batch.get<unsigned char>();
  a.d_tables = (*dm)->d_tables();
  a.user_tables = g.user_tables;
  a.item_tables = g.item_tables;
  a.d_user_out = d_user.get<float>();
  a.user_ld = g.user_ld;
  a.d_item_out = d_item.get<float>();
  a.item_ld = g.item_ld;
  a.max_candidates = kernels::CandidateBucket(std::max(n, r));
  a.max_requests = a.max_candidates;
  a.prefetch_ids = false;  // not with a hot-row cache
  a.row_type = g.row_type;
  a.d_hot = d_hot.get<kernels::HotCacheTable>();
  a.d_hot_counts = d_counts.get<unsigned long long>();
  ASSERT_EQ(kernels::LaunchPooledLookup(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  EXPECT_EQ(gpu_test::Download<unsigned long long>(d_counts, want_counts.size()), want_counts)
      << "per table: ids read from the cache, then the others";
  // Every owned column equals the cached model's lookup; rows with a hot id of non-zero
  // weight differ from the plain model's by far more than the tolerance.
  int told_apart = 0;
  auto expect_block = [&](const DeviceBuffer& d, const std::vector<float>& want,
                          const std::vector<float>& plain_want, uint32_t rows, int ld,
                          const std::vector<std::pair<int, int>>& cols, const char* what) {
    const std::vector<float> got = gpu_test::Download<float>(d, want.size());
    for (uint32_t row = 0; row < rows; ++row) {
      for (auto [col, dim] : cols) {
        for (int e = col; e < col + dim; ++e) {
          const size_t at = size_t{row} * ld + e;
          const double tolerance = 1e-5 * std::max(1.0f, std::fabs(want[at]));
          ASSERT_NEAR(got[at], want[at], tolerance) << what << " row " << row << " col " << e
                                                    << ": the table's value is " << plain_want[at];
          if (std::fabs(want[at] - plain_want[at]) > 100 * tolerance) ++told_apart;
        }
      }
    }
  };
  expect_block(d_user, want_user, plain_user, r, g.user_ld, user_cols, "user block");
  expect_block(d_item, want_item, plain_item, n, g.item_ld, item_cols, "item block");
  EXPECT_GT(told_apart, 0) << "no pooled value depends on which copy of a hot row is read";
}

}  // namespace
}  // namespace fuserank::engine::cuda
