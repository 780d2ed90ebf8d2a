// An int8 storage: redis table against a real 3-master cluster: each value is the row's
// dim codes followed by its (scale, bias) as float32 (docs/remote-tables.md), and the table
// served from the cluster (then from the near cache) scores bit for bit as the same table
// served locally; a key the cluster lacks pools as zeros; a value without its qparams is an
// error of kind value_size.
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote_tier.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/engine/remote/cluster_test_util.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using fuserank::testing::RedisCluster;
using Clock = std::chrono::steady_clock;

constexpr int64_t kRows = 300;
constexpr int kRemoteTable = 2;  // item_1 of SmallSpec(1, 2, ...)

// `local` with table `remote_table` moved to the cluster: the other tables' codes and
// qparams and the dense layers as they are.
absl::StatusOr<std::shared_ptr<const Model>> WithoutTable(const Model& local,
                                                          const fuserank::testing::TestModel& tm,
                                                          int remote_table) {
  ModelSpec spec = local.spec();
  spec.tables[remote_table].storage = Storage::kRedis;
  spec.tables[remote_table].rows = 0;
  TensorMap tensors;
  for (const EmbeddingTable& table : local.tables()) {
    if (table.spec_index == remote_table) continue;
    const std::string prefix = absl::StrCat("embeddings.", table.name);
    tensors[prefix + ".weight"] =
        TensorView{"I8", {table.rows, table.dim}, table.data, table.row_bytes * table.rows};
    tensors[prefix + ".qparams"] = TensorView{"F32",
                                              {table.rows, 2},
                                              reinterpret_cast<const std::byte*>(table.qparams),
                                              static_cast<size_t>(table.rows) * 2 * sizeof(float)};
  }
  for (const auto& [name, values] : tm.weights) {
    if (name.rfind("embeddings.", 0) == 0) continue;
    tensors[name] =
        TensorView{"F32", tm.shapes.at(name), reinterpret_cast<const std::byte*>(values.data()),
                   values.size() * sizeof(float)};
  }
  return Model::FromTensors(spec, tensors);
}

class RemoteTierInt8Test : public ::testing::Test {
 protected:
  void SetUp() override {
    fuserank::testing::StartThreeMasters(&cluster_);
    if (IsSkipped() || HasFatalFailure()) return;
    ModelSpec spec = fuserank::testing::SmallSpec(1, 2, kRows, 8);
    spec.embedding_dtype = DType::kInt8;
    std::mt19937_64 rng(17);
    absl::StatusOr<std::shared_ptr<const Model>> local =
        test::BuildVariantModel(spec, 17, rng, &test_model_);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = *local;
    absl::StatusOr<std::shared_ptr<const Model>> remote =
        WithoutTable(*local_, test_model_, kRemoteTable);
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    options_.seed_nodes = cluster_->seeds();
    options_.fetch_deadline_ms = 2000;
    ASSERT_TRUE(RemoteTier::Create(remote_, options_, &tier_).ok());
    BackendOptions backend;
    backend.workers = 1;
    local_backend_ = CreateCpuBackend(local_, backend);
    backend.remote = tier_.get();
    remote_backend_ = CreateCpuBackend(remote_, backend);
  }

  // Writes rows [0, kRows) of the local table: codes, then (scale, bias); with
  // `codes_only` without the qparams (a value of the wrong length).
  void LoadTable(bool codes_only = false) {
    const EmbeddingTable& table = local_->tables()[kRemoteTable];
    std::vector<std::string> keys;
    std::vector<std::string> values;
    for (int64_t id = 0; id < kRows; ++id) {
      keys.push_back(tier_->Key(kRemoteTable, id));
      std::string value(reinterpret_cast<const char*>(table.data + id * table.row_bytes),
                        table.row_bytes);
      if (!codes_only) {
        value.append(reinterpret_cast<const char*>(table.qparams + 2 * id), 2 * sizeof(float));
      }
      values.push_back(std::move(value));
    }
    std::vector<remote::Command> commands;
    for (int64_t id = 0; id < kRows; ++id) commands.push_back({keys[id], values[id], true});
    ASSERT_TRUE(fuserank::testing::SetAllThroughNewClient(cluster_->seeds(), commands,
                                                          std::chrono::seconds(10)));
  }

  Batch RemoteBatch(const Batch& local) {
    return fuserank::testing::WithRowsAsKeys(local, remote_);
  }

  std::vector<test::RefRequest> Requests(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<test::RefRequest> requests;
    for (int candidates : {1, 9, 70}) {
      test::RequestShape shape;
      shape.candidates = candidates;
      shape.max_bag = 3;
      shape.out_of_range = false;
      requests.push_back(test::RandomRequest(test_model_.spec, shape, rng));
      requests.back().top_k = 0;
    }
    return requests;
  }

  uint64_t Lookups(Tier t) { return tier_->counters(kRemoteTable).lookups[static_cast<int>(t)]; }

  std::unique_ptr<RedisCluster> cluster_;
  fuserank::testing::TestModel test_model_;
  std::shared_ptr<const Model> local_;
  std::shared_ptr<const Model> remote_;
  RemoteTierOptions options_;
  std::unique_ptr<RemoteTier> tier_;
  std::unique_ptr<Backend> local_backend_;
  std::unique_ptr<Backend> remote_backend_;
};

void ExpectBitIdentical(const std::vector<std::vector<float>>& want,
                        const std::vector<std::vector<float>>& got, int pass) {
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
}

TEST_F(RemoteTierInt8Test, ValuesCarryTheirQParams) {
  EXPECT_EQ(tier_->ValueBytes(kRemoteTable), 8u + 2 * sizeof(float));
}

TEST_F(RemoteTierInt8Test, ScoresAreBitIdenticalToTheLocalTable) {
  LoadTable();
  const Batch local_batch = test::MakeBatch(local_, Requests(5));
  const Batch remote_batch = RemoteBatch(local_batch);
  BatchResult local_result;
  BatchResult remote_result;
  const auto want = test::ScoresByIndex(*local_backend_, 0, local_batch, local_result);
  for (int pass = 0; pass < 3; ++pass) {  // from the cluster, then from the near cache
    const auto got = test::ScoresByIndex(*remote_backend_, 0, remote_batch, remote_result);
    EXPECT_TRUE(remote_result.request_errors.empty());
    ExpectBitIdentical(want, got, pass);
    if (pass == 0) {
      EXPECT_GT(Lookups(Tier::kRemote), 0u);
    }
  }
  EXPECT_GT(Lookups(Tier::kNear), 0u);
  EXPECT_EQ(Lookups(Tier::kAbsent), 0u);
}

TEST_F(RemoteTierInt8Test, AKeyTheClusterLacksPoolsAsZeros) {
  LoadTable();
  test::RefRequest request = Requests(9)[1];
  for (test::RefCandidate& candidate : request.candidates) candidate.bags[1] = {{3}, {}};
  const Batch local_batch = test::MakeBatch(local_, {request});
  for (test::RefCandidate& candidate : request.candidates) candidate.bags[1] = {{3, 3}, {}};
  Batch remote_batch = RemoteBatch(test::MakeBatch(local_, {request}));
  for (size_t c = 0; c < request.candidates.size(); ++c) {
    remote_batch.item.keys[remote_batch.item.bag_begin[c * 2 + 1] + 1] = 999999;
  }
  BatchResult a;
  BatchResult b;
  ExpectBitIdentical(test::ScoresByIndex(*local_backend_, 0, local_batch, a),
                     test::ScoresByIndex(*remote_backend_, 0, remote_batch, b), 0);
  EXPECT_EQ(Lookups(Tier::kAbsent), request.candidates.size());
}

TEST_F(RemoteTierInt8Test, AValueWithoutItsQParamsIsAValueSizeError) {
  LoadTable(/*codes_only=*/true);
  const Batch batch = RemoteBatch(test::MakeBatch(local_, Requests(3)));
  BatchResult result;
  const absl::Status run = remote_backend_->Run(0, batch, &result);
  ASSERT_TRUE(run.ok()) << run;
  ASSERT_FALSE(result.request_errors.empty());  // on_remote_error: fail
  EXPECT_EQ(result.request_errors[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_GT(tier_->counters(kRemoteTable).errors[0], 0u);  // kind 0: value_size
  EXPECT_EQ(RemoteErrorName(0), "value_size");
}

}  // namespace
}  // namespace fuserank::engine
