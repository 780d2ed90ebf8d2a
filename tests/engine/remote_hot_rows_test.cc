// The hot-row set of a storage: redis table against a real 3-master cluster: SetHotRows's
// ids are fetched from the cluster when the set is built and then served from the hot
// tier with no fetch (tier "hot", hits counted), bit for bit as the table served locally;
// an id the cluster lacks is left out of the set and served as absent (zeros); a failed
// fetch fails the Set with UNAVAILABLE naming the table and changes nothing; Get and an
// empty Set (clear) work; the frequency policy samples a redis table's ids and a rebuild
// installs the most used ones (a failed fetch keeps the old set when all tables rebuild);
// a reload carries a redis table's hot ids (fetched again), and when the cluster cannot
// answer then, the local tables' sets are still carried.
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/hot_rows/hot_row_cache.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote_tier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/engine/remote/cluster_test_util.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using fuserank::testing::RedisCluster;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr int64_t kRows = 200;
constexpr int kRemoteTable = 2;  // item_1 of SmallSpec(1, 2, ...)

class RemoteHotRowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fuserank::testing::StartThreeMasters(&cluster_);
    if (IsSkipped() || HasFatalFailure()) return;
    ModelSpec spec = fuserank::testing::SmallSpec(1, 2, kRows, 8);
    std::mt19937_64 rng(23);
    absl::StatusOr<std::shared_ptr<const Model>> local =
        test::BuildVariantModel(spec, 23, rng, &test_model_);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = *local;
    fuserank::testing::TestModel remote_model = test_model_;
    remote_model.spec.tables[kRemoteTable].storage = Storage::kRedis;
    remote_model.spec.tables[kRemoteTable].rows = 0;
    remote_model.weights.erase("embeddings.item_1.weight");
    remote_model.shapes.erase("embeddings.item_1.weight");
    absl::StatusOr<std::shared_ptr<const Model>> remote =
        fuserank::testing::BuildTestModel(remote_model);
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    RemoteTierOptions options;
    options.seed_nodes = cluster_->seeds();
    options.fetch_deadline_ms = 2000;
    options.near_cache_rows = 0;  // what is not hot is fetched: the tiers are told apart
    ASSERT_TRUE(RemoteTier::Create(remote_, options, &tier_).ok());
    HotRowOptions hot;
    hot.capacity = 64;
    absl::StatusOr<std::unique_ptr<HotRowManager>> manager = HotRowManager::Create(remote_, hot);
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
    manager_->SetRemoteRows(tier_.get());
    BackendOptions backend;
    backend.workers = 1;
    local_backend_ = CreateCpuBackend(local_, backend);
    backend.remote = tier_.get();
    backend.hot_rows = manager_.get();
    remote_backend_ = CreateCpuBackend(remote_, backend);
    LoadTable();
  }

  void LoadTable() {
    ASSERT_TRUE(fuserank::testing::WriteTableRows(
        local_->tables()[kRemoteTable], [&](int64_t id) { return tier_->Key(kRemoteTable, id); },
        cluster_->seeds()));
  }

  // Requests whose item_1 bags read only ids in `ids`.
  std::vector<test::RefRequest> Requests(uint64_t seed, const std::vector<int64_t>& ids) {
    std::mt19937_64 rng(seed);
    std::vector<test::RefRequest> requests;
    for (int candidates : {1, 9, 40}) {
      test::RequestShape shape;
      shape.candidates = candidates;
      shape.max_bag = 3;
      shape.out_of_range = false;
      requests.push_back(test::RandomRequest(test_model_.spec, shape, rng));
      requests.back().top_k = 0;
      for (test::RefCandidate& candidate : requests.back().candidates) {
        candidate.bags[1] = {{ids[rng() % ids.size()], ids[rng() % ids.size()]}, {}};
      }
    }
    return requests;
  }

  Batch RemoteBatch(const Batch& local) {
    return fuserank::testing::WithRowsAsKeys(local, remote_);
  }

  uint64_t Lookups(Tier t) { return tier_->counters(kRemoteTable).lookups[static_cast<int>(t)]; }

  absl::StatusOr<HotRowsStatus> SetHot(const std::vector<int64_t>& ids) {
    const TableIds table{"item_1", ids};
    return manager_->Set({&table, 1});
  }

  std::unique_ptr<RedisCluster> cluster_;
  fuserank::testing::TestModel test_model_;
  std::shared_ptr<const Model> local_;
  std::shared_ptr<const Model> remote_;
  std::unique_ptr<RemoteTier> tier_;
  std::unique_ptr<HotRowManager> manager_;
  std::unique_ptr<Backend> local_backend_;
  std::unique_ptr<Backend> remote_backend_;
};

void ExpectBitIdentical(const std::vector<std::vector<float>>& want,
                        const std::vector<std::vector<float>>& got) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < want.size(); ++r) {
    ASSERT_EQ(got[r].size(), want[r].size());
    for (size_t c = 0; c < want[r].size(); ++c) {
      uint32_t a = 0;
      uint32_t b = 0;
      std::memcpy(&a, &want[r][c], 4);
      std::memcpy(&b, &got[r][c], 4);
      EXPECT_EQ(a, b) << "request " << r << " candidate " << c;
    }
  }
}

TEST_F(RemoteHotRowsTest, HotIdsAreServedFromTheHotTierWithoutAFetch) {
  const std::vector<int64_t> hot = {5, 17, 42, 99, 150, 17};  // 17 twice: one row
  absl::StatusOr<HotRowsStatus> set = SetHot(hot);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->tables.size(), 1u);
  EXPECT_EQ(set->tables[0].hot_rows, 5u);
  EXPECT_EQ(set->version, 1u);
  const uint64_t fetches = tier_->fetches();  // the Set's own fetch is not a batch's

  const Batch local_batch = test::MakeBatch(local_, Requests(3, hot));
  const Batch remote_batch = RemoteBatch(local_batch);
  BatchResult a;
  BatchResult b;
  const auto want = test::ScoresByIndex(*local_backend_, 0, local_batch, a);
  for (int pass = 0; pass < 2; ++pass) {
    ExpectBitIdentical(want, test::ScoresByIndex(*remote_backend_, 0, remote_batch, b));
    EXPECT_TRUE(b.request_errors.empty());
  }
  EXPECT_EQ(tier_->fetches(), fetches);  // the user table and item_0 are local: no fetch
  EXPECT_GT(Lookups(Tier::kHot), 0u);
  EXPECT_EQ(Lookups(Tier::kRemote), 0u);
  EXPECT_EQ(Lookups(Tier::kNear), 0u);
  absl::StatusOr<HotRowsStatus> got = manager_->Get({});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tables[kRemoteTable].hits, Lookups(Tier::kHot));
  EXPECT_EQ(got->tables[kRemoteTable].misses, 0u);

  // Ids outside the set are fetched (and counted as misses), with the same scores.
  const Batch mixed_local = test::MakeBatch(local_, Requests(4, {5, 6, 7, 150, 151}));
  ExpectBitIdentical(test::ScoresByIndex(*local_backend_, 0, mixed_local, a),
                     test::ScoresByIndex(*remote_backend_, 0, RemoteBatch(mixed_local), b));
  EXPECT_GT(Lookups(Tier::kRemote), 0u);
  EXPECT_EQ(tier_->fetches(), fetches + 1);
  EXPECT_GT(manager_->Get({})->tables[kRemoteTable].misses, 0u);
}

TEST_F(RemoteHotRowsTest, AHotIdTheClusterLacksIsServedAsAbsent) {
  absl::StatusOr<HotRowsStatus> set = SetHot({3, 777777});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->tables[0].hot_rows, 1u);  // 777777 is not in the cluster: not held
  test::RefRequest request = Requests(5, {3})[1];
  for (test::RefCandidate& candidate : request.candidates) candidate.bags[1] = {{3}, {}};
  const Batch local_batch = test::MakeBatch(local_, {request});
  for (test::RefCandidate& candidate : request.candidates) candidate.bags[1] = {{3, 3}, {}};
  Batch remote_batch = RemoteBatch(test::MakeBatch(local_, {request}));
  for (size_t c = 0; c < request.candidates.size(); ++c) {
    remote_batch.item.keys[remote_batch.item.bag_begin[c * 2 + 1] + 1] = 777777;
  }
  BatchResult a;
  BatchResult b;
  ExpectBitIdentical(test::ScoresByIndex(*local_backend_, 0, local_batch, a),
                     test::ScoresByIndex(*remote_backend_, 0, remote_batch, b));
  EXPECT_EQ(Lookups(Tier::kAbsent), request.candidates.size());
  EXPECT_EQ(Lookups(Tier::kHot), request.candidates.size());
}

TEST_F(RemoteHotRowsTest, AFailedFetchFailsTheSetAndChangesNothing) {
  ASSERT_TRUE(SetHot({1, 2, 3}).ok());
  // Ids on every master, one of which is gone.
  ASSERT_TRUE(cluster_->Kill(0).ok());
  std::vector<int64_t> ids;
  for (int64_t id = 0; id < 60; ++id) ids.push_back(id);
  absl::StatusOr<HotRowsStatus> set = SetHot(ids);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kUnavailable) << set.status();
  EXPECT_THAT(set.status().message(), HasSubstr("'item_1'"));
  EXPECT_THAT(set.status().message(), HasSubstr("unchanged"));
  absl::StatusOr<HotRowsStatus> got = manager_->Get({});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->version, 1u);
  EXPECT_EQ(got->tables[kRemoteTable].hot_rows, 3u);
}

TEST_F(RemoteHotRowsTest, ClearAndCapacity) {
  ASSERT_TRUE(SetHot({1, 2, 3}).ok());
  absl::StatusOr<HotRowsStatus> cleared = SetHot({});
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_EQ(cleared->tables[0].hot_rows, 0u);
  std::vector<int64_t> too_many;
  for (int64_t id = 0; id < 65; ++id) too_many.push_back(id * 1000003);
  absl::StatusOr<HotRowsStatus> over = SetHot(too_many);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument) << over.status();
  EXPECT_THAT(over.status().message(), HasSubstr("capacity 64"));
  // One id 65 times: every id counts (SPEC section 3), before anything is fetched.
  absl::StatusOr<HotRowsStatus> repeated = SetHot(std::vector<int64_t>(65, 1));
  EXPECT_EQ(repeated.status().code(), absl::StatusCode::kInvalidArgument) << repeated.status();
  EXPECT_THAT(repeated.status().message(), HasSubstr("65 ids, more than the hot-set capacity 64"));
}

// cache.policy: frequency: ids sampled while batches are staged reach the table's sketch,
// and a rebuild installs the most often used ones, fetched from the cluster.
TEST_F(RemoteHotRowsTest, ARebuildInstallsTheMostOftenUsedIds) {
  HotRowOptions hot;
  hot.capacity = 3;
  hot.sample_period = 1;
  absl::StatusOr<std::unique_ptr<HotRowManager>> manager = HotRowManager::Create(remote_, hot);
  ASSERT_TRUE(manager.ok()) << manager.status();
  (*manager)->SetRemoteRows(tier_.get());
  BackendOptions backend;
  backend.workers = 1;
  backend.remote = tier_.get();
  backend.hot_rows = manager->get();
  backend.sample_accesses = true;
  std::unique_ptr<Backend> sampled = CreateCpuBackend(remote_, backend);
  // 11, 12 and 13 in every bag, 100 + k once each.
  std::vector<test::RefRequest> requests = Requests(8, {0});
  int64_t cold = 100;
  for (test::RefRequest& request : requests) {
    for (test::RefCandidate& candidate : request.candidates) {
      candidate.bags[1] = {{11, 12, 13, cold++}, {}};
    }
  }
  const Batch local_batch = test::MakeBatch(local_, requests);
  const Batch remote_batch = RemoteBatch(local_batch);
  BatchResult result;
  for (int pass = 0; pass < 3; ++pass) test::ScoresByIndex(*sampled, 0, remote_batch, result);
  const std::vector<std::string> named = {"item_1"};
  absl::StatusOr<HotRowsStatus> rebuilt = (*manager)->Rebuild(named);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(rebuilt->tables[0].hot_rows, 3u);
  const std::shared_ptr<const HotRowSnapshot> snapshot = (*manager)->snapshot();
  for (const int64_t id : {11, 12, 13}) EXPECT_GE(snapshot->table(kRemoteTable).FindId(id), 0);
  // Served from the hot tier, bit for bit as locally.
  const uint64_t hot_before = Lookups(Tier::kHot);
  BatchResult local_result;
  ExpectBitIdentical(test::ScoresByIndex(*local_backend_, 0, local_batch, local_result),
                     test::ScoresByIndex(*sampled, 0, remote_batch, result));
  EXPECT_GT(Lookups(Tier::kHot), hot_before);
  // A rebuild of every table with the cluster gone keeps item_1's set (and rebuilds the
  // local tables); naming item_1 then fails with the fetch's status.
  for (int node = 0; node < cluster_->size(); ++node) ASSERT_TRUE(cluster_->Kill(node).ok());
  absl::StatusOr<HotRowsStatus> all = (*manager)->Rebuild({});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*manager)->snapshot()->table(kRemoteTable).size(), 3);
  EXPECT_EQ((*manager)->snapshot()->table(1).size(), 3);  // item_0's most used rows
  const absl::Status one = (*manager)->Rebuild(named).status();
  EXPECT_EQ(one.code(), absl::StatusCode::kUnavailable) << one;
}

TEST_F(RemoteHotRowsTest, AReloadCarriesTheIdsAndTheLocalSetsWhenTheClusterIsDown) {
  HotRowCacheOptions options;
  options.capacity = 64;
  for (const bool down : {false, true}) {
    SCOPED_TRACE(down ? "cluster down" : "cluster up");
    absl::StatusOr<std::unique_ptr<HotRowCache>> old =
        HotRowCache::Create("m", remote_, options, nullptr);
    ASSERT_TRUE(old.ok()) << old.status();
    (*old)->manager()->SetRemoteRows(tier_.get());
    (*old)->StartServing(nullptr);
    const std::vector<int64_t> local_ids = {1, 2};
    const std::vector<int64_t> remote_ids = {3, 4, 5};
    const TableIds tables[] = {{"item_0", local_ids}, {"item_1", remote_ids}};
    ASSERT_TRUE((*old)->Set(tables).ok());
    if (down) {
      for (int node = 0; node < cluster_->size(); ++node) ASSERT_TRUE(cluster_->Kill(node).ok());
    }
    absl::StatusOr<std::unique_ptr<HotRowCache>> fresh =
        HotRowCache::Create("m", remote_, options, old->get());
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    (*fresh)->manager()->SetRemoteRows(tier_.get());
    (*fresh)->StartServing(old->get());
    const std::shared_ptr<const HotRowSnapshot> carried = (*fresh)->manager()->snapshot();
    EXPECT_EQ(carried->table(1).size(), 2);  // item_0
    EXPECT_EQ(carried->table(kRemoteTable).size(), down ? 0 : 3);
    if (!down) {
      EXPECT_GE(carried->table(kRemoteTable).FindId(4), 0);
    }
  }
}

}  // namespace
}  // namespace fuserank::engine
