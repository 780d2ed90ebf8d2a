// Goodput under open-loop overload, a bounded version of the `make bench`
// section (bench/run_overload_bench.sh): the real server binary as a child process pinned
// to one core, the load (bench/loadgen, Poisson arrivals, 2 s deadlines, latency from the
// scheduled send) pinned to another. Closed-loop capacity first, then 0.9x, 1.5x, 3x and
// 6x of it, then 0.5x again. The server must not collapse (before admission control it measured
// 0.16 of capacity at 1.5x, 0.06 at 3x, OK answers seconds late): OK answers per second stay a
// large share of capacity at every overload, answers and refusals at 1.5x and 3x come back
// in well under a second, and the load after the spike is served as before it. The bounds
// are loose (this runs on shared 2-core machines); docs/benchmarks.md has the table.
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/loadgen/load_runner.h"
#include "bench/loadgen/request_pool.h"
#include "gtest/gtest.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/server_process_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

constexpr int kCandidates = 256;

// 12 tables, a dot interaction and a 256-128 top MLP over 256 candidates: about a
// millisecond of compute per request on one core, so 6x of capacity is a rate one client
// core can still send.
engine::ModelSpec OverloadSpec() {
  engine::ModelSpec spec = testing::SmallSpec(4, 8, 2000, 16);
  spec.name = "overload";
  spec.dense_user = 4;
  spec.dense_item = 4;
  spec.bottom_mlp = {32, 16};
  spec.top_mlp = {256, 128, 1};
  return spec;
}

// Pins the calling thread (and the threads it starts) to `cpu`; false when it may not.
bool PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

struct Point {
  std::string name;
  double offered = 0;  // requests per second
  double goodput = 0;  // OK answers per second (answered inside the window)
  double ok_p99_ms = 0;
  double refused_p99_ms = 0;
  std::string errors;
};

Point Measure(const std::string& name, const bench::RunOptions& options,
              const bench::RequestPool& pool) {
  Point point;
  point.name = name;
  point.offered = options.rate;
  absl::StatusOr<bench::RunResult> result = bench::RunLoad(options, pool);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return point;
  point.goodput = static_cast<double>(result->completed_ok) / result->window_s;
  point.ok_p99_ms = static_cast<double>(result->latency.ValueAtQuantile(0.99)) / 1e6;
  point.refused_p99_ms = static_cast<double>(result->refused.ValueAtQuantile(0.99)) / 1e6;
  for (const auto& [code, n] : result->errors_by_code) {
    absl::StrAppend(&point.errors, point.errors.empty() ? "" : ", ", n, " ", code);
  }
  return point;
}

TEST(GoodputTest, OverloadIsShedAtTheDoorWithoutCollapse) {
  const cpu_set_t before = [] {
    cpu_set_t set;
    sched_getaffinity(0, sizeof(set), &set);
    return set;
  }();
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "needs 2 CPUs: server and load on their own";
  const testing::TestModel model = testing::MakeRandomModel(OverloadSpec(), 51);
  const std::string dir = testing::TempDir("goodput");
  absl::StatusOr<std::string> path = testing::WriteTestModel(model, dir);
  ASSERT_TRUE(path.ok()) << path.status();
  // A queue of 64 (the setting overload collapse was first measured with), everything else
  // at its default; the overload runs add a queue latency budget of 50 ms. Capacity is
  // measured without it: at 64 calls in flight the budget would refuse some of the closed
  // loop's own calls.
  auto write_config = [&](const std::string& name, const std::string& extra) {
    const std::string path_out = absl::StrCat(dir, "/server_", name, ".yaml");
    std::ofstream(path_out) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"\", "
                               "metrics_listen: \"\"}\nengine: {device: cpu, queue_capacity: 64"
                            << extra << "}\nmodel: {path: \"" << *path
                            << "\"}\nlogging: {level: info}\n";
    return path_out;
  };
  const std::string binary = FUSERANK_BINARY_DIR "/bin/fuserank-server";
  auto server = std::make_unique<testing::ServerProcess>();
  ASSERT_TRUE(server->Start(binary, write_config("capacity", ""), "0")) << server->log();
  ASSERT_TRUE(PinTo(1));

  bench::RequestOptions request;
  request.candidates = kCandidates;
  absl::StatusOr<bench::RequestPool> pool = bench::BuildRequestPool(model.spec, request, 256);
  ASSERT_TRUE(pool.ok()) << pool.status();
  bench::RunOptions options;
  options.target = absl::StrCat("127.0.0.1:", server->port());
  options.timeout_ms = 2000;
  options.warmup_s = 0.5;
  options.duration_s = 2;
  options.concurrency = 64;  // enough in flight to fill batches: capacity with batching
  absl::StatusOr<bench::RunResult> closed = bench::RunLoad(options, *pool);
  ASSERT_TRUE(closed.ok()) << closed.status();
  const double capacity = static_cast<double>(closed->completed_ok) / closed->window_s;
  ASSERT_GT(capacity, 50) << "the server barely answers: " << server->log();
  EXPECT_EQ(server->Stop(), 0);
  server = std::make_unique<testing::ServerProcess>();
  ASSERT_TRUE(server->Start(binary, write_config("overload", ", max_queue_delay_ms: 50"), "0"))
      << server->log();
  options.target = absl::StrCat("127.0.0.1:", server->port());
  options.concurrency = 0;

  std::vector<Point> points;
  for (const double factor : {0.9, 1.5, 3.0, 6.0, 0.5}) {
    options.rate = factor * capacity;
    options.seed = static_cast<uint64_t>(factor * 10);
    points.push_back(Measure(absl::StrCat(factor, "x"), options, *pool));
  }
  sched_setaffinity(0, sizeof(before), &before);
  std::printf("goodput: capacity %.0f requests/s (closed loop, 64 in flight)\n", capacity);
  for (const Point& p : points) {
    std::printf(
        "  %-5s offered %7.0f/s  OK %7.0f/s = %.2f of capacity  OK p99 %8.2f ms  "
        "refused p99 %6.2f ms  %s\n",
        p.name.c_str(), p.offered, p.goodput, p.goodput / capacity, p.ok_p99_ms, p.refused_p99_ms,
        p.errors.c_str());
  }
  // Loose bounds: the collapse before admission control was 0.16 at 1.5x, 0.06 at 3x and 0.12
  // at 6x, with OK answers 1.7 s, 2.8 s and 7.8 s late (p50). Each point here is 2 s on a
  // shared 2-core machine whose speed drifts between the capacity run and these: over 21
  // runs on one such machine the lowest goodput seen was 0.56 at 1.5x, 0.37 at 3x and 0.08
  // at 6x (docs/benchmarks.md, "Goodput under overload"), so the bounds sit below that.
  EXPECT_GT(points[1].goodput, 0.4 * capacity) << "1.5x";
  EXPECT_GT(points[2].goodput, 0.25 * capacity) << "3x";
  EXPECT_GT(points[3].goodput, 0.04 * capacity) << "6x";
  // No answer waits for long. At 6x refusing alone takes most of a core here, and the
  // transport then queues calls in front of the door (up to 0.6 s seen): a looser bound.
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_LT(points[i].ok_p99_ms, 1000) << points[i].name << ": OK answers queued for long";
    EXPECT_LT(points[i].refused_p99_ms, 500) << points[i].name << ": refusals were not at once";
  }
  EXPECT_LT(points[3].ok_p99_ms, 1500) << "6x: OK answers queued for long";
  EXPECT_GT(points[4].goodput, 0.4 * capacity) << "after the spike";
  EXPECT_LT(points[4].ok_p99_ms, 4 * std::max(points[0].ok_p99_ms, 5.0)) << "after the spike";
  EXPECT_EQ(server->Stop(), 0);
}

}  // namespace
}  // namespace fuserank
