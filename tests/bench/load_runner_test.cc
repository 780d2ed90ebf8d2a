#include "bench/loadgen/load_runner.h"

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "engine/model_spec.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace fuserank::bench {
namespace {

// A Ranker that scores candidate i as 1 / (i + 2) and can be told to misbehave.
class FakeRanker final : public fuserank::v1::Ranker::Service {
 public:
  std::atomic<int> fail_every{0};     // > 0: every n-th call returns RESOURCE_EXHAUSTED
  std::atomic<bool> drop_one{false};  // return one item too few
  std::atomic<int> calls{0};
  std::atomic<int> serial_ms{0};  // > 0: serve one call at a time, each taking this long

  grpc::Status Rank(grpc::ServerContext*, const fuserank::v1::RankRequest* request,
                    fuserank::v1::RankResponse* response) override {
    const int call = ++calls;
    if (serial_ms > 0) {
      absl::MutexLock lock(&serial_);
      std::this_thread::sleep_for(std::chrono::milliseconds(serial_ms.load()));
    }
    if (fail_every > 0 && call % fail_every == 0) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
    }
    const int n = request->candidates_size();
    int k = request->top_k() == 0 ? n : std::min<int>(n, request->top_k());
    if (drop_one) --k;
    for (int i = 0; i < k; ++i) {
      auto* item = response->add_items();
      item->set_index(i);
      item->set_item_id(request->candidates(i).item_id());
      item->set_score(1.0f / (i + 2));
    }
    return grpc::Status::OK;
  }

 private:
  absl::Mutex serial_;
};

class LoadRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    engine::ModelSpec spec;
    engine::TableSpec user{.name = "u", .side = engine::Side::kUser, .rows = 10, .dim = 4};
    engine::TableSpec item{.name = "i", .side = engine::Side::kItem, .rows = 100, .dim = 4};
    spec.tables = {user, item};
    spec.dense_item = 2;
    RequestOptions request;
    request.candidates = 8;
    request.top_k = 5;
    absl::StatusOr<RequestPool> pool = BuildRequestPool(spec, request, 16);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
    options_.target = "127.0.0.1:" + std::to_string(port_);
    options_.duration_s = 0.6;
    options_.warmup_s = 0.2;
    options_.timeout_ms = 2000;
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  FakeRanker service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  RequestPool pool_;
  RunOptions options_;
};

TEST_F(LoadRunnerTest, ClosedLoopMeasuresOnlyTheWindow) {
  options_.concurrency = 3;
  options_.threads = 2;
  absl::StatusOr<RunResult> result = RunLoad(options_, pool_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GT(result->ok, 10);
  EXPECT_EQ(result->errors, 0);
  EXPECT_EQ(result->latency.count(), result->ok);
  EXPECT_GT(result->latency.ValueAtQuantile(0.5), 0);
  // The warm-up calls were served but not counted.
  EXPECT_GT(service_.calls.load(), result->ok);
  EXPECT_DOUBLE_EQ(result->window_s, 0.6);
}

TEST_F(LoadRunnerTest, OpenLoopSendsAtTheRate) {
  options_.rate = 400;
  options_.duration_s = 1.0;
  absl::StatusOr<RunResult> result = RunLoad(options_, pool_);
  ASSERT_TRUE(result.ok()) << result.status();
  // Poisson: 400 expected arrivals, standard deviation 20.
  EXPECT_GT(result->ok, 300);
  EXPECT_LT(result->ok, 500);
  EXPECT_EQ(result->errors, 0);
}

// A server that answers 50 calls/s, offered 100/s for 0.5 s: a sender that waited for
// answers (coordinated omission) would see about 20 ms per call. The open loop times each
// call from its scheduled send, so the queue that builds up shows in the latency, and
// only the answers that arrived inside the window count as throughput.
TEST_F(LoadRunnerTest, OpenLoopLatencyIncludesTheQueueOfASlowServer) {
  service_.serial_ms = 20;
  options_.rate = 100;
  options_.duration_s = 0.5;
  options_.warmup_s = 0;
  options_.threads = 2;
  options_.timeout_ms = 5000;
  absl::StatusOr<RunResult> result = RunLoad(options_, pool_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->errors, 0);
  ASSERT_GT(result->ok, 35);  // Poisson, 50 expected (seed 1)
  EXPECT_EQ(result->latency.count(), result->ok);
  // The last calls waited for every call before them: about ok * 20 ms - 0.5 s.
  const double queue_ms = result->ok * 20.0 - 500.0;
  EXPECT_GT(result->latency.max() / 1e6, 0.7 * queue_ms) << result->ok << " calls";
  EXPECT_GT(result->latency.ValueAtQuantile(0.9) / 1e6, 0.5 * queue_ms);
  // At most 0.5 s / 20 ms answers fit in the window; the rest drained after it.
  EXPECT_LE(result->completed_ok, 26);
  EXPECT_LT(result->completed_ok, result->ok);
  EXPECT_GT(result->drain_ns / 1e6, 0.7 * queue_ms);
}

TEST_F(LoadRunnerTest, ScheduleChangesTheRateInOneRun) {
  options_.schedule = {{200, 0.4}, {800, 0.2}, {200, 0.4}};
  options_.bucket_s = 0.2;
  options_.threads = 2;
  absl::StatusOr<RunResult> result = RunLoad(options_, pool_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_DOUBLE_EQ(result->window_s, 1.0);
  ASSERT_EQ(result->buckets.size(), 5u);
  int64_t ok = 0;
  for (size_t b = 0; b < 5; ++b) {
    const WindowBucket& bucket = result->buckets[b];
    EXPECT_NEAR(bucket.start_s, 0.2 * b, 1e-9);
    EXPECT_DOUBLE_EQ(bucket.rate, b == 2 ? 800 : 200);
    // Poisson: 40 expected (sd 6.3) at 200/s, 160 (sd 12.6) at 800/s.
    if (b == 2) {
      EXPECT_GT(bucket.ok, 110) << b;
      EXPECT_LT(bucket.ok, 210) << b;
    } else {
      EXPECT_GT(bucket.ok, 15) << b;
      EXPECT_LT(bucket.ok, 70) << b;
    }
    EXPECT_EQ(bucket.latency.count(), bucket.ok);
    ok += bucket.ok;
  }
  EXPECT_EQ(ok, result->ok);
  EXPECT_FALSE(RunLoad(RunOptions{.target = options_.target, .schedule = {{0, 1}}}, pool_).ok());
}

TEST_F(LoadRunnerTest, CountsErrorsByCode) {
  service_.fail_every = 4;
  options_.concurrency = 2;
  absl::StatusOr<RunResult> result = RunLoad(options_, pool_);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_GT(result->errors, 0);
  EXPECT_EQ(result->errors_by_code.at("RESOURCE_EXHAUSTED"), result->errors);
  EXPECT_NEAR(static_cast<double>(result->errors) / (result->ok + result->errors), 0.25, 0.05);
}

TEST_F(LoadRunnerTest, FlagsResponsesWithTheWrongItemCount) {
  service_.drop_one = true;
  options_.concurrency = 1;
  absl::StatusOr<RunResult> result = RunLoad(options_, pool_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->ok, 0);
  EXPECT_GT(result->errors_by_code.at("BAD_RESPONSE"), 0);
}

TEST_F(LoadRunnerTest, RejectsBadOptionsAndUnreachableTargets) {
  EXPECT_FALSE(RunLoad(options_, pool_).ok());  // neither concurrency nor rate
  options_.concurrency = 1;
  options_.rate = 5;
  EXPECT_FALSE(RunLoad(options_, pool_).ok());  // both
  options_.rate = 0;
  options_.target = "127.0.0.1:1";
  options_.connect_timeout_ms = 200;
  absl::StatusOr<RunResult> result = RunLoad(options_, pool_);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
}

// Option errors come before the connection: the target here never answers, so an error
// other than InvalidArgument means the options were taken.
class LoadRunnerOptionsTest : public LoadRunnerTest {
 protected:
  void SetUp() override {
    LoadRunnerTest::SetUp();
    options_.target = "127.0.0.1:1";
    options_.connect_timeout_ms = 200;
  }
  // The error of a run with `options_`, InvalidArgument expected.
  std::string OptionError() {
    absl::StatusOr<RunResult> result = RunLoad(options_, pool_);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
    return std::string(result.status().message());
  }
};

// --bucket=0.001 --duration=10 needed ~2.3 GB of histograms; it was taken.
TEST_F(LoadRunnerOptionsTest, RefusesTooManyBuckets) {
  options_.rate = 100;
  options_.duration_s = 2;
  options_.bucket_s = 0.0005;  // 4,000 buckets
  const std::string message = OptionError();
  EXPECT_NE(message.find("--bucket"), std::string::npos) << message;
  EXPECT_NE(message.find("--duration"), std::string::npos) << message;
  options_.bucket_s = 0.002;  // 1,000 buckets: taken, then the target does not connect
  EXPECT_EQ(RunLoad(options_, pool_).status().code(), absl::StatusCode::kUnavailable);
}

// A bucket under half a nanosecond was silently no bucket.
TEST_F(LoadRunnerOptionsTest, RefusesABucketThatRoundsToZero) {
  options_.concurrency = 1;
  options_.bucket_s = 1e-10;
  EXPECT_NE(OptionError().find("rounds to 0 ns"), std::string::npos);
}

// inf and nan were taken as a phase's rate or duration (an inf rate sends with no gap).
TEST_F(LoadRunnerOptionsTest, RefusesAPhaseThatIsNotFiniteNamingIt) {
  options_.schedule = {{100, 0.5}, {std::numeric_limits<double>::infinity(), 0.5}};
  EXPECT_NE(OptionError().find("--schedule phase 2 of 2: the rate must be finite"),
            std::string::npos);
  options_.schedule = {{100, std::numeric_limits<double>::quiet_NaN()}};
  EXPECT_NE(OptionError().find("--schedule phase 1 of 1: the duration must be finite"),
            std::string::npos);
  // A phase's rate of 0 is the schedule's error, not "give one of --concurrency and --rate".
  options_.schedule = {{0, 1}};
  EXPECT_NE(OptionError().find("--schedule phase 1 of 1: the rate"), std::string::npos);
}

TEST_F(LoadRunnerOptionsTest, RefusesARateOrWindowThatIsNotFinite) {
  options_.rate = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(OptionError().find("--rate must be finite"), std::string::npos);
  options_.rate = 100;
  options_.duration_s = std::numeric_limits<double>::infinity();
  EXPECT_NE(OptionError().find("--duration must be > 0 and at most"), std::string::npos);
  options_.duration_s = 1;
  options_.warmup_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(OptionError().find("--warmup must be >= 0"), std::string::npos);
}

// A mean gap beyond int64 nanoseconds (1e-12/s: 1e21 ns) wrapped round to a time long past
// and sent without pause; it ends the sends instead.
TEST_F(LoadRunnerTest, ATinyRateSendsOnlyTheFirstCall) {
  options_.rate = 1e-12;
  options_.duration_s = 0.3;
  options_.warmup_s = 0;
  absl::StatusOr<RunResult> result = RunLoad(options_, pool_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_LE(result->ok + result->errors, 1);
  EXPECT_LE(service_.calls.load(), 1);
}

}  // namespace
}  // namespace fuserank::bench
