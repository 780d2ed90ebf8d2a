// storage: redis tables through the CPU engine against a real 3-master cluster: the same
// table served locally and from the cluster scores bit for bit alike, keys the cluster
// lacks pool as zeros, the near cache keeps repeated keys local and serves a rewritten row
// once its TTL has passed, and a master that is gone fails the requests that needed it
// (on_remote_error: fail) or serves zeros for them (zero).
#include "engine/remote_tier.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote/key_slot.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/engine/remote/cluster_test_util.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using fuserank::testing::RedisCluster;
using fuserank::testing::TestModel;

constexpr int64_t kRows = 500;
constexpr int kRemoteTable = 2;  // item_1 of SmallSpec(1, 2, ...)

class RemoteTierTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    fuserank::testing::StartThreeMasters(&cluster_);
    if (IsSkipped() || HasFatalFailure()) return;
    ModelSpec spec = fuserank::testing::SmallSpec(1, 2, kRows, 8);
    spec.embedding_dtype = GetParam();
    std::mt19937_64 rng(11);
    absl::StatusOr<std::shared_ptr<const Model>> local =
        test::BuildVariantModel(spec, 11, rng, &test_model_);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = *local;
    // The same model with item_1 in the cluster instead of the weights.
    TestModel remote_model = test_model_;
    remote_model.spec.tables[kRemoteTable].storage = Storage::kRedis;
    remote_model.spec.tables[kRemoteTable].rows = 0;
    remote_model.weights.erase("embeddings.item_1.weight");
    remote_model.shapes.erase("embeddings.item_1.weight");
    absl::StatusOr<std::shared_ptr<const Model>> remote =
        fuserank::testing::BuildTestModel(remote_model);
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    options_.seed_nodes = cluster_->seeds();
    options_.fetch_deadline_ms = 2000;  // loaded test machines: no timeouts unless a test wants one
  }

  // Writes rows [0, kRows) of the local table to the cluster, as fuserank-load-redis does.
  void LoadTable(const RemoteTier& tier) {
    ASSERT_TRUE(fuserank::testing::WriteTableRows(
        local_->tables()[kRemoteTable], [&](int64_t id) { return tier.Key(kRemoteTable, id); },
        cluster_->seeds()));
  }

  // One-worker CPU backends of the local model and of the remote one on `tier`.
  std::unique_ptr<Backend> LocalBackend() {
    BackendOptions options;
    options.workers = 1;
    return CreateCpuBackend(local_, options);
  }
  std::unique_ptr<Backend> RemoteBackend(RemoteTier* tier) {
    BackendOptions options;
    options.workers = 1;
    options.remote = tier;
    return CreateCpuBackend(remote_, options);
  }

  std::unique_ptr<RemoteTier> MakeTier() {
    std::unique_ptr<RemoteTier> tier;
    EXPECT_TRUE(RemoteTier::Create(remote_, options_, &tier).ok());
    return tier;
  }

  Batch RemoteBatch(const Batch& local) {
    return fuserank::testing::WithRowsAsKeys(local, remote_);
  }

  std::vector<test::RefRequest> Requests(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<test::RefRequest> requests;
    for (int candidates : {1, 7, 64, 130}) {
      test::RequestShape shape;
      shape.candidates = candidates;
      shape.max_bag = 3;
      shape.out_of_range = false;  // ids are rows: the same keys in the cluster
      requests.push_back(test::RandomRequest(test_model_.spec, shape, rng));
      requests.back().top_k = 0;
    }
    return requests;
  }

  uint64_t Lookups(const RemoteTier& tier, Tier t) {
    return tier.counters(kRemoteTable).lookups[static_cast<int>(t)].load();
  }

  std::unique_ptr<RedisCluster> cluster_;
  TestModel test_model_;
  std::shared_ptr<const Model> local_;
  std::shared_ptr<const Model> remote_;
  RemoteTierOptions options_;
};

TEST_P(RemoteTierTest, ScoresAreBitIdenticalToTheLocalTable) {
  std::unique_ptr<RemoteTier> tier = MakeTier();
  LoadTable(*tier);
  std::unique_ptr<Backend> local = LocalBackend();
  std::unique_ptr<Backend> remote = RemoteBackend(tier.get());
  const Batch local_batch = test::MakeBatch(local_, Requests(5));
  const Batch remote_batch = RemoteBatch(local_batch);
  BatchResult local_result;
  BatchResult remote_result;
  const auto want = test::ScoresByIndex(*local, 0, local_batch, local_result);
  for (int pass = 0; pass < 3; ++pass) {  // from the cluster, then from the near cache
    const auto got = test::ScoresByIndex(*remote, 0, remote_batch, remote_result);
    EXPECT_TRUE(remote_result.request_errors.empty());
    ASSERT_EQ(got.size(), want.size());
    for (size_t r = 0; r < want.size(); ++r) {
      ASSERT_EQ(got[r].size(), want[r].size());
      for (size_t c = 0; c < want[r].size(); ++c) {
        uint32_t a = 0;
        uint32_t b = 0;
        std::memcpy(&a, &want[r][c], 4);
        std::memcpy(&b, &got[r][c], 4);
        EXPECT_EQ(a, b) << "pass " << pass << " request " << r << " candidate " << c;
      }
    }
    if (pass == 0) {
      EXPECT_GT(Lookups(*tier, Tier::kRemote), 0u);
      EXPECT_EQ(Lookups(*tier, Tier::kNear), 0u);
    }
  }
  EXPECT_GT(Lookups(*tier, Tier::kNear), 0u);
  EXPECT_EQ(Lookups(*tier, Tier::kAbsent), 0u);
  // One fetch per batch that missed the near cache, at most one round trip per node.
  EXPECT_EQ(tier->fetches(), 1u);
  EXPECT_LE(tier->round_trips(), 3u);
}

TEST_P(RemoteTierTest, AKeyTheClusterLacksPoolsAsZeros) {
  std::unique_ptr<RemoteTier> tier = MakeTier();
  LoadTable(*tier);
  std::unique_ptr<Backend> local = LocalBackend();
  std::unique_ptr<Backend> remote = RemoteBackend(tier.get());
  // item_1's bag: {3, 999999} remotely (999999 was never written) vs {3} locally.
  test::RefRequest request = Requests(9)[1];
  for (test::RefCandidate& candidate : request.candidates) candidate.bags[1] = {{3}, {}};
  Batch local_batch = test::MakeBatch(local_, {request});
  for (test::RefCandidate& candidate : request.candidates) candidate.bags[1] = {{3, 3}, {}};
  Batch remote_batch = RemoteBatch(test::MakeBatch(local_, {request}));
  for (size_t c = 0; c < request.candidates.size(); ++c) {
    // The second id of each candidate's item_1 bag (bag c * 2 + 1) becomes the absent key.
    remote_batch.item.keys[remote_batch.item.bag_begin[c * 2 + 1] + 1] = 999999;
  }
  BatchResult a;
  BatchResult b;
  EXPECT_EQ(test::ScoresByIndex(*local, 0, local_batch, a),
            test::ScoresByIndex(*remote, 0, remote_batch, b));
  EXPECT_EQ(Lookups(*tier, Tier::kAbsent), request.candidates.size());
}

TEST_P(RemoteTierTest, ARewrittenRowIsServedOnceTheNearCacheTtlPassed) {
  options_.near_cache_ttl_ms = 300;
  std::unique_ptr<RemoteTier> tier = MakeTier();
  LoadTable(*tier);
  std::unique_ptr<Backend> remote = RemoteBackend(tier.get());
  const Batch batch = RemoteBatch(test::MakeBatch(local_, Requests(21)));
  BatchResult result;
  const auto before = test::ScoresByIndex(*remote, 0, batch, result);
  // Every row of the table rewritten as zeros.
  const size_t row_bytes = remote_->tables()[kRemoteTable].row_bytes;
  const std::string zeros(row_bytes, '\0');
  std::vector<std::string> keys;
  for (int64_t id = 0; id < kRows; ++id) keys.push_back(tier->Key(kRemoteTable, id));
  std::vector<remote::Command> commands;
  for (const std::string& key : keys) commands.push_back({key, zeros, true});
  ASSERT_TRUE(fuserank::testing::SetAllThroughNewClient(cluster_->seeds(), commands,
                                                        std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto after = test::ScoresByIndex(*remote, 0, batch, result);
  EXPECT_NE(before, after);
  // The same as a model whose item_1 rows are all zero: every item_1 bag empty locally.
  std::vector<test::RefRequest> requests = Requests(21);
  for (test::RefRequest& request : requests) {
    for (test::RefCandidate& candidate : request.candidates) candidate.bags[1] = {};
  }
  std::unique_ptr<Backend> local = LocalBackend();
  BatchResult local_result;
  EXPECT_EQ(after, test::ScoresByIndex(*local, 0, test::MakeBatch(local_, requests), local_result));
}

TEST_P(RemoteTierTest, AKilledMasterFailsTheRequestsThatNeededItOrServesZeros) {
  options_.near_cache_rows = 0;
  options_.fetch_deadline_ms = 500;
  for (const OnRemoteError mode : {OnRemoteError::kFail, OnRemoteError::kZero}) {
    SCOPED_TRACE(mode == OnRemoteError::kFail ? "fail" : "zero");
    options_.on_remote_error = mode;
    std::unique_ptr<RemoteTier> tier = MakeTier();
    LoadTable(*tier);
    std::unique_ptr<Backend> remote = RemoteBackend(tier.get());
    // Request 0 reads only key 1, request 1 only a key on another master.
    const int victim = cluster_->MasterOfSlot(remote::KeySlot(tier->Key(kRemoteTable, 1)));
    int64_t other = 2;
    while (cluster_->MasterOfSlot(remote::KeySlot(tier->Key(kRemoteTable, other))) == victim) {
      ++other;
    }
    std::vector<test::RefRequest> requests = Requests(3);
    requests.resize(2);
    for (int r = 0; r < 2; ++r) {
      for (test::RefCandidate& candidate : requests[r].candidates) {
        candidate.bags[1] = {{r == 0 ? 1 : other}, {}};
      }
    }
    const Batch batch = RemoteBatch(test::MakeBatch(local_, requests));
    ASSERT_TRUE(cluster_->Kill(victim).ok());
    BatchResult result;
    ASSERT_TRUE(remote->Run(0, batch, &result).ok());
    if (mode == OnRemoteError::kFail) {
      ASSERT_EQ(result.request_errors.size(), 2u);
      EXPECT_EQ(result.request_errors[0].code(), absl::StatusCode::kUnavailable);
      EXPECT_NE(result.request_errors[0].message().find("'item_1'"), std::string::npos)
          << result.request_errors[0];
      EXPECT_TRUE(result.request_errors[1].ok()) << result.request_errors[1];
    } else {
      EXPECT_TRUE(result.request_errors.empty());
    }
    EXPECT_GT(tier->counters(kRemoteTable).errors[static_cast<int>(remote::ErrorKind::kConnection)],
              0u);
    // The master returns (empty: no persistence here); its keys are then absent, not errors.
    ASSERT_TRUE(cluster_->Restart(victim).ok());
    ASSERT_TRUE(cluster_->WaitHealthy().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    result.Clear();
    ASSERT_TRUE(remote->Run(0, batch, &result).ok());
    result.Clear();
    ASSERT_TRUE(remote->Run(0, batch, &result).ok());
    EXPECT_TRUE(result.request_errors.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RemoteTierTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

}  // namespace
}  // namespace fuserank::engine
