// Hot-set swaps under load through the real server: client threads rank fixed requests
// while another thread swaps random hot sets every few milliseconds through
// Admin.SetHotRows (and sends refused swaps that must change nothing). No request may
// fail, and every response must be byte-identical to the same request's response before
// any hot set existed: the hot set never changes a score, bit for bit (SPEC section 1).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/hot_rows_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank {
namespace {

using testing::AdminReply;
using testing::HotRowsAdmin;

constexpr int kCapacity = 32;
constexpr int kRows = 300;
constexpr int kClients = 4;
constexpr int kRequests = 24;
// Load runs at least kLoadTime and until the swaps and answers below are reached (the
// counts, not the time, are what the test needs), or kPatience has passed: a machine
// slow enough to miss them in that time fails the test.
constexpr auto kLoadTime = std::chrono::milliseconds(1500);
constexpr auto kPatience = std::chrono::seconds(120);
constexpr int kMinSwaps = 50;
constexpr int kMinRefused = 5;
constexpr int64_t kMinAnswers = 100;

// user_0, user_1 (mean), item_0, item_1 (oov: reject), item_2 (mean) in `dtype`.
testing::TestModel SwapModel(engine::DType dtype) {
  engine::ModelSpec spec = testing::SmallSpec(2, 3, kRows, 8);
  spec.name = "swap";
  spec.weights_path = "swap.safetensors";
  spec.embedding_dtype = dtype;
  spec.tables[1].pooling = engine::Pooling::kMean;
  spec.tables[3].oov = engine::Oov::kReject;
  spec.tables[4].pooling = engine::Pooling::kMean;
  return testing::MakeRandomModel(spec, 41);
}

// What the swapping thread saw (the counts read while it runs).
struct SwapTally {
  std::atomic<int> swaps{0};
  std::atomic<int> refused{0};
  std::atomic<bool> ended{false};  // it returned early: a problem
  std::string problem;             // the first thing that went wrong
};

// What one client saw (`ok` read while it runs).
struct ClientTally {
  std::atomic<int64_t> ok{0};
  int64_t failed = 0;
  int64_t changed = 0;
  std::string problem;
};

class HotRowsSwapE2eTest : public ::testing::TestWithParam<engine::DType> {
 protected:
  void SetUp() override {
    model_ = SwapModel(GetParam());
    const std::string dir =
        testing::TempDir(absl::StrCat("hot_rows_swap_", static_cast<int>(GetParam())));
    absl::StatusOr<std::string> path = testing::WriteTestModel(model_, dir);
    ASSERT_TRUE(path.ok()) << path.status();
    const std::string yaml = absl::StrCat(R"(
server:
  listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:0"
  metrics_listen: ""
  shutdown_grace_seconds: 2
engine: {device: cpu, streams: 2, queue_capacity: 256}
cache: {hot_rows_per_table: )",
                                          kCapacity, R"(}
model: {path: ")",
                                          *path, R"(", watch_interval_seconds: 0}
)");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "hot_rows_swap.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<server::Server>> started = server::Server::Start(*config);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    ranker_ = v1::Ranker::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                      grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // Random ids for table `t` (spec order): out of range too where `oov: modulo` maps them.
  static std::vector<int64_t> RandomIds(int t, int count, std::mt19937_64& rng) {
    std::vector<int64_t> ids;
    for (int i = 0; i < count; ++i) {
      const int64_t id = static_cast<int64_t>(rng() % kRows);
      ids.push_back(t == 3 ? id : id + kRows * (static_cast<int64_t>(rng() % 5) - 2));
    }
    return ids;
  }

  // Swaps until `stop`, checking each answer and the version after it.
  void Swap(uint64_t seed, const std::atomic<bool>& stop, SwapTally* tally) {
    HotRowsAdmin admin(server_->admin_port());
    std::mt19937_64 rng(seed);
    uint64_t version = 0;
    auto problem = [&](const std::string& what) {
      if (tally->problem.empty()) tally->problem = absl::StrCat("seed ", seed, ": ", what);
      tally->ended = true;
    };
    while (!stop.load()) {
      const int kind = static_cast<int>(rng() % 10);
      testing::TableIdList tables;
      std::vector<int> order = {0, 1, 2, 3, 4};
      std::shuffle(order.begin(), order.end(), rng);
      const int listed = 1 + static_cast<int>(rng() % 5);
      for (int i = 0; i < listed; ++i) {
        const int t = order[i];
        tables.emplace_back(model_.spec.tables[t].name,
                            RandomIds(t, static_cast<int>(rng() % (kCapacity + 1)), rng));
      }
      grpc::StatusCode want = grpc::StatusCode::OK;
      if (kind == 8) {
        tables.emplace_back("no_such_table", std::vector<int64_t>{1});
        want = grpc::StatusCode::NOT_FOUND;
      } else if (kind == 9) {
        std::vector<int64_t> too_many(kCapacity + 1);
        for (int i = 0; i <= kCapacity; ++i) too_many[i] = i;
        tables[0].second = too_many;
        want = grpc::StatusCode::INVALID_ARGUMENT;
      }
      const AdminReply reply = admin.Set(tables);
      if (reply.status.error_code() != want) {
        problem(absl::StrCat("swap got code ", static_cast<int>(reply.status.error_code()), " (",
                             reply.status.error_message(), "), wanted ", static_cast<int>(want)));
        return;
      }
      if (want == grpc::StatusCode::OK) {
        ++tally->swaps;
        if (reply.response.version() != ++version) {
          problem(absl::StrCat("version ", reply.response.version(), " after a swap, wanted ",
                               version));
          return;
        }
      } else {
        ++tally->refused;
        const AdminReply now = admin.Get();
        if (!now.status.ok() || now.response.version() != version) {
          problem(absl::StrCat("a refused swap moved the version to ", now.response.version()));
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  // Ranks requests until `stop`, comparing every response with `expected`.
  void Client(int c, const std::vector<std::string>& expected, const std::atomic<bool>& stop,
              ClientTally* tally) {
    for (int k = 0; !stop.load(); ++k) {
      const int i = (c + k * kClients) % kRequests;
      const testing::Reply reply = testing::Rank(ranker_.get(), requests_[i]);
      if (!reply.status.ok()) {
        ++tally->failed;
        if (tally->problem.empty()) tally->problem = reply.status.error_message();
      } else if (reply.response.SerializeAsString() != expected[i]) {
        ++tally->changed;
        if (tally->problem.empty()) tally->problem = absl::StrCat("request ", i, " scored apart");
      } else {
        ++tally->ok;
      }
    }
  }

  testing::TestModel model_;
  std::vector<v1::RankRequest> requests_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<v1::Ranker::Stub> ranker_;
};

TEST_P(HotRowsSwapE2eTest, SwapsUnderLoadFailNothingAndChangeNoScoreBit) {
  for (int i = 0; i < kRequests; ++i) {
    requests_.push_back(testing::RandomRequest(model_, 500 + i, 24));
  }
  std::vector<std::string> expected;  // with no hot set
  for (const v1::RankRequest& request : requests_) {
    const testing::Reply reply = testing::Rank(ranker_.get(), request);
    testing::ExpectMatchesReference(model_, request, reply);
    expected.push_back(reply.response.SerializeAsString());
  }
  ASSERT_FALSE(HasFailure());

  const uint64_t seed = testing::TestSeed();
  std::atomic<bool> stop{false};
  SwapTally swaps;
  std::vector<ClientTally> clients(kClients);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] { Client(c, expected, stop, &clients[c]); });
  }
  threads.emplace_back([&] { Swap(seed, stop, &swaps); });
  auto answers = [&] {
    int64_t ok = 0;
    for (const ClientTally& c : clients) ok += c.ok.load();
    return ok;
  };
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const bool enough = swaps.swaps.load() >= kMinSwaps && swaps.refused.load() >= kMinRefused &&
                        answers() >= kMinAnswers;
    if ((enough && now >= start + kLoadTime) || swaps.ended.load() || now >= start + kPatience) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  SCOPED_TRACE(absl::StrCat("swap ", testing::SeedTrace(seed)));
  EXPECT_EQ(swaps.problem, "");
  EXPECT_GE(swaps.swaps.load(), kMinSwaps)
      << "too few swaps to prove anything in " << seconds << " s";
  EXPECT_GE(swaps.refused.load(), kMinRefused) << "in " << seconds << " s";
  const int64_t ok = answers();
  for (const ClientTally& c : clients) {
    EXPECT_EQ(c.failed, 0) << c.problem;
    EXPECT_EQ(c.changed, 0) << c.problem;
  }
  EXPECT_GE(ok, kMinAnswers) << "in " << seconds << " s";
  // The swaps were live: lookups were served from the hot sets.
  const AdminReply status = HotRowsAdmin(server_->admin_port()).Get();
  ASSERT_TRUE(status.status.ok()) << status.status.error_message();
  uint64_t hits = 0;
  for (const v1::TableHotRowsStatus& t : status.response.tables()) hits += t.hits();
  EXPECT_GT(hits, 0u) << "no lookup hit a hot set";
  std::printf("%d swaps, %d refused, %lld requests, %llu hits in %.1f s\n", swaps.swaps.load(),
              swaps.refused.load(), static_cast<long long>(ok),
              static_cast<unsigned long long>(hits), seconds);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HotRowsSwapE2eTest,
                         ::testing::Values(engine::DType::kF32, engine::DType::kF16),
                         [](const ::testing::TestParamInfo<engine::DType>& info) {
                           return info.param == engine::DType::kF32 ? "fp32" : "fp16";
                         });

}  // namespace
}  // namespace fuserank
