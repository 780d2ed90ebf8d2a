#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/batcher.h"
#include "engine/cpu/cpu_simd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

// A TCP connection to 127.0.0.1:`port` whose reads give up after `timeout` (-1 on error).
int Connect(int port, std::chrono::seconds timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count());
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// Everything the server sends on `fd` until it closes it, or until a read times out
// (`*timed_out` set).
std::string ReadUntilClosed(int fd, bool* timed_out) {
  std::string got;
  char buffer[4096];
  *timed_out = false;
  for (;;) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      got.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) *timed_out = true;
    return got;
  }
}

// What a peer that never finishes its request sends.
constexpr char kPartialRequest[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";

// The start of a CPU model's fuserank_model_info series, up to its `model` label.
std::string CpuModelInfo() { return R"(fuserank_model_info{device="cpu",)"; }

TEST(MetricsTest, DefinesEveryFamilyOfTheSpec) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ((*metrics)->port(), 0);
  (*metrics)->Table("user_id");
  (*metrics)->SetHotRows({{"user_id", 0}});
  (*metrics)->SetModelInfo("demo", "1", "cpu");
  (*metrics)->SetModelInfo("gpu", "2", "cuda:0");
  const std::string text = (*metrics)->Scrape();
  for (const char* family :
       {"# TYPE fuserank_requests_total counter",
        "# TYPE fuserank_request_duration_seconds histogram",
        "# TYPE fuserank_stage_duration_seconds histogram",
        "# TYPE fuserank_batch_candidates histogram",
        "# TYPE fuserank_embedding_cache_lookups_total counter", "# TYPE fuserank_hot_rows gauge",
        "# TYPE fuserank_hot_rows_version gauge", "# TYPE fuserank_inflight_requests gauge",
        "# TYPE fuserank_queue_depth gauge", "# TYPE fuserank_model_info gauge",
        "# TYPE fuserank_graph_capture_failures_total counter"}) {
    EXPECT_THAT(text, HasSubstr(family));
  }
  EXPECT_THAT(text, HasSubstr(CpuModelInfo() + R"(model="demo",version="1"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_model_info{device="cuda",model="gpu",version="2"} 1)"));
  // The CPU engine's instruction set is a series of its own, not a label of the SPEC's.
  EXPECT_THAT(text, HasSubstr(std::string(R"(fuserank_cpu_isa_info{isa=")") +
                              engine::CpuIsaName(engine::GetCpuDispatch().isa) + "\"} 1"));
  EXPECT_THAT(
      text, HasSubstr(R"(fuserank_embedding_cache_lookups_total{result="hit",table="user_id"} 0)"));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_hot_rows{table="user_id"} 0)"));
  // Stage buckets run from 10 us to 10 s.
  EXPECT_THAT(text, HasSubstr(R"(fuserank_stage_duration_seconds_bucket{stage="dnn",le="1e-05"})"));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_stage_duration_seconds_bucket{stage="dnn",le="10"})"));
}

TEST(MetricsTest, RecordsIntoTheLabelledSeries) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("");
  ASSERT_TRUE(metrics.ok());
  Metrics& m = **metrics;
  m.RecordRequest(Rpc::kRank, grpc::StatusCode::INVALID_ARGUMENT, 0.001);
  m.RecordRequest(Rpc::kRank, grpc::StatusCode::INVALID_ARGUMENT, 0.002);
  m.RecordRequest(Rpc::kSetHotRows, grpc::StatusCode::UNIMPLEMENTED, 0.0);
  m.RecordStage(Stage::kTopk, 0.5);
  m.RecordBatchCandidates(300);
  m.AddInflight(3);
  m.AddInflight(-1);
  m.SetQueueDepthSource([] { return 7; });
  m.SetHotRowsVersion(4);
  const TableCacheMetrics table = m.Table("item_id");
  EXPECT_EQ(table.hits, m.Table("item_id").hits) << "one series per table";
  const std::string text = m.Scrape();
  EXPECT_THAT(text, HasSubstr(R"(fuserank_requests_total{code="INVALID_ARGUMENT",rpc="Rank"} 2)"));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_requests_total{code="OK",rpc="Rank"} 0)"));
  EXPECT_THAT(text,
              HasSubstr(R"(fuserank_requests_total{code="UNIMPLEMENTED",rpc="SetHotRows"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_request_duration_seconds_count{rpc="Rank"} 2)"));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_stage_duration_seconds_sum{stage="topk"} 0.5)"));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_stage_duration_seconds_count{stage="decode"} 0)"));
  EXPECT_THAT(text, HasSubstr("fuserank_batch_candidates_count 1"));
  EXPECT_THAT(text, HasSubstr("fuserank_inflight_requests 2"));
  EXPECT_THAT(text, HasSubstr("fuserank_queue_depth 7"));
  EXPECT_THAT(text, HasSubstr("fuserank_hot_rows_version 4"));
}

// A batch whose stages the backend did not time (a CUDA graph replayed outside the sampled
// share) adds its queue time and batch size, and nothing to the four compute stages.
TEST(MetricsTest, AnUntimedBatchRecordsNoComputeStage) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("");
  ASSERT_TRUE(metrics.ok());
  Metrics& m = **metrics;
  engine::RequestResult result;
  result.batch_requests = 1;
  result.batch_candidates = 10;
  result.queue_seconds = 0.25;
  result.stages = {0.001, 0.002, 0.003, 0.004};
  m.RecordResult(result);
  result.stages.timed = false;
  m.RecordResult(result);
  const std::string text = m.Scrape();
  EXPECT_THAT(text, HasSubstr(R"(fuserank_stage_duration_seconds_count{stage="queue"} 2)"));
  EXPECT_THAT(text, HasSubstr("fuserank_batch_candidates_count 2"));
  for (const char* stage : {"lookup", "cross", "dnn", "topk"}) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat(R"(fuserank_stage_duration_seconds_count{stage=")",
                                             stage, R"("} 1)")));
  }
}

TEST(MetricsTest, CountsReloadModelUnderItsOwnRpcLabel) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("");
  ASSERT_TRUE(metrics.ok());
  (*metrics)->RecordRequest(Rpc::kReloadModel, grpc::StatusCode::OK, 0.5);
  const std::string text = (*metrics)->Scrape();
  EXPECT_THAT(text, HasSubstr(R"(fuserank_requests_total{code="OK",rpc="ReloadModel"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_request_duration_seconds_count{rpc="ReloadModel"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_requests_total{code="OK",rpc="RebuildHotRows"} 0)"));
}

TEST(MetricsTest, RemovesTheModelInfoOfARetiredVersion) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("");
  ASSERT_TRUE(metrics.ok());
  Metrics& m = **metrics;
  m.SetModelInfo("demo", "1", "cpu");
  m.SetModelInfo("demo", "2", "cpu");
  m.SetModelInfo("other", "1", "cpu");
  m.RemoveModelInfo("demo", "1", "cpu");
  m.RemoveModelInfo("demo", "9", "cpu");  // none: no-op
  const std::string text = m.Scrape();
  EXPECT_THAT(text, ::testing::Not(HasSubstr(R"(model="demo",version="1")")));
  EXPECT_THAT(text, HasSubstr(CpuModelInfo() + R"(model="demo",version="2"} 1)"));
  EXPECT_THAT(text, HasSubstr(CpuModelInfo() + R"(model="other",version="1"} 1)"));
}

// A table no served model has any more leaves no fuserank_hot_rows series behind (a
// process that loads many models over its life would keep them all); its counters stay.
TEST(MetricsTest, TheHotRowsSeriesOfATableNoLongerListedIsRemoved) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("");
  ASSERT_TRUE(metrics.ok());
  Metrics& m = **metrics;
  m.Table("old");
  m.Table("kept");
  m.SetHotRows({{"old", 5}, {"kept", 2}});
  std::string text = m.Scrape();
  EXPECT_THAT(text, HasSubstr(R"(fuserank_hot_rows{table="old"} 5)"));
  m.SetHotRows({{"kept", 4}});
  text = m.Scrape();
  EXPECT_THAT(text, ::testing::Not(HasSubstr(R"(fuserank_hot_rows{table="old"})")));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_hot_rows{table="kept"} 4)"));
  EXPECT_THAT(text,
              HasSubstr(R"(fuserank_embedding_cache_lookups_total{result="hit",table="old"} 0)"));
  m.SetHotRows({{"kept", 4}, {"old", 1}});  // back in a later model
  EXPECT_THAT(m.Scrape(), HasSubstr(R"(fuserank_hot_rows{table="old"} 1)"));
}

TEST(MetricsTest, TheCollectHookRunsBeforeEveryScrapeUntilRemoved) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("127.0.0.1:0");
  ASSERT_TRUE(metrics.ok());
  Metrics& m = **metrics;
  int calls = 0;
  m.SetCollectHook([&] { m.SetHotRowsVersion(++calls); });
  EXPECT_THAT(m.Scrape(), HasSubstr("fuserank_hot_rows_version 1"));
  EXPECT_THAT(m.Scrape(), HasSubstr("fuserank_hot_rows_version 2"));
  m.SetCollectHook(nullptr);
  EXPECT_THAT(m.Scrape(), HasSubstr("fuserank_hot_rows_version 2"));
  EXPECT_EQ(calls, 2);
}

// fuserank_queue_depth is read from its source at each scrape: what waits now, also when
// the last request to finish saw a deeper queue (the gauge is set by no request).
TEST(MetricsTest, TheQueueDepthIsReadFromItsSourceAtEveryScrape) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  int waiting = 3;
  (*metrics)->SetQueueDepthSource([&waiting] { return waiting; });
  EXPECT_THAT((*metrics)->Scrape(), HasSubstr("\nfuserank_queue_depth 3\n"));
  waiting = 0;  // idle
  EXPECT_THAT((*metrics)->Scrape(), HasSubstr("\nfuserank_queue_depth 0\n"));
  (*metrics)->SetQueueDepthSource(nullptr);
  waiting = 5;
  EXPECT_THAT((*metrics)->Scrape(), HasSubstr("\nfuserank_queue_depth 0\n"));
}

TEST(MetricsTest, ServesOnAnyFreePort) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("127.0.0.1:0");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_GT((*metrics)->port(), 0);
}

TEST(MetricsTest, AnAddressItCannotBindIsAnErrorNamingIt) {
  absl::StatusOr<std::unique_ptr<Metrics>> first = Metrics::Create("127.0.0.1:0");
  ASSERT_TRUE(first.ok());
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  absl::StatusOr<std::unique_ptr<Metrics>> second = Metrics::Create(taken);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("server.metrics_listen: cannot serve /metrics on '" + taken + "'"));
  absl::StatusOr<std::unique_ptr<Metrics>> ipv6 = Metrics::Create("[::1]:0");
  ASSERT_FALSE(ipv6.ok());
  EXPECT_THAT(std::string(ipv6.status().message()), HasSubstr("'[::1]:0'"));
}

// Idle peers that send part of a request (civetweb gave each a worker for 30 s, and there
// were two workers) do not hold up a scrape: it is answered at once, not ~30 s later.
TEST(MetricsTest, PeersThatSendPartOfARequestDoNotHoldUpAScrape) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("127.0.0.1:0");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const int port = (*metrics)->port();
  std::vector<int> idle;
  for (int i = 0; i < 6; ++i) {  // three times the two workers there were
    const int fd = Connect(port, std::chrono::seconds(1));
    ASSERT_GE(fd, 0);
    SendAll(fd, kPartialRequest);
    idle.push_back(fd);
  }
  // Far below the 30 s the peers held it for before, far above a scrape's time.
  const int scrape = Connect(port, std::chrono::seconds(10));
  ASSERT_GE(scrape, 0);
  SendAll(scrape, "GET /metrics HTTP/1.0\r\n\r\n");
  bool timed_out = false;
  const std::string answer = ReadUntilClosed(scrape, &timed_out);
  close(scrape);
  for (int fd : idle) close(fd);
  EXPECT_FALSE(timed_out) << "no answer within 10 s while " << idle.size()
                          << " peers held partial requests";
  EXPECT_THAT(answer, HasSubstr("200 OK"));
  EXPECT_THAT(answer, HasSubstr("# TYPE fuserank_requests_total counter"));
}

// A peer that never finishes its request is dropped after a few seconds (civetweb's default
// request timeout was 30 s), so more such peers than workers free a worker soon.
TEST(MetricsTest, APeerThatNeverFinishesItsRequestIsDroppedWithinSeconds) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("127.0.0.1:0");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const int fd = Connect((*metrics)->port(), std::chrono::seconds(10));
  ASSERT_GE(fd, 0);
  SendAll(fd, kPartialRequest);
  bool timed_out = false;
  ReadUntilClosed(fd, &timed_out);
  close(fd);
  EXPECT_FALSE(timed_out) << "the server still held the connection after 10 s";
}

}  // namespace
}  // namespace fuserank::server
