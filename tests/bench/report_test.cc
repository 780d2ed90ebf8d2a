#include "bench/loadgen/report.h"

#include <string>

#include "gtest/gtest.h"

namespace fuserank::bench {
namespace {

BenchReport SampleReport() {
  BenchReport report;
  report.target = "127.0.0.1:1";
  report.model = "m\"x";
  report.run.concurrency = 4;
  report.request.candidates = 16;
  report.requests_pool = 8;
  report.result.window_s = 2.0;
  report.result.ok = 200;
  report.result.completed_ok = 200;
  report.result.errors = 3;
  report.result.errors_by_code = {{"UNAVAILABLE", 2}, {"BAD_RESPONSE", 1}};
  for (int i = 1; i <= 100; ++i) report.result.latency.Record(i * 10000);  // 0.01 .. 1 ms
  return report;
}

// True when `json` holds `"key":value` with the whole value: followed by ',' or the
// object's end, so "p90_ms":0.9 does not match 0.99.
bool HasField(const std::string& json, const std::string& field) {
  for (size_t at = json.find(field); at != std::string::npos; at = json.find(field, at + 1)) {
    const bool starts = at > 0 && (json[at - 1] == '{' || json[at - 1] == ',');
    const size_t end = at + field.size();
    if (starts && end < json.size() && (json[end] == ',' || json[end] == '}')) return true;
  }
  return false;
}

TEST(ReportTest, JsonIsOneLineWithTheContractKeys) {
  const std::string json = ReportJson(SampleReport());
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_EQ(json.find('\n'), std::string::npos);
  // The histogram rounds a quantile up to its bucket's upper bound (within 1/256).
  for (const char* field :
       {"\"qps\":100.00", "\"p50_ms\":0.5007", "\"p90_ms\":0.9011", "\"p99_ms\":0.9912",
        "\"p999_ms\":1.0000", "\"errors\":3", "\"ok\":200", "\"completed_ok\":200",
        "\"candidates\":16", "\"concurrency\":4", "\"rate\":null", "\"duration_s\":2.000",
        "\"candidates_per_s\":1600.0", "\"mode\":\"closed\"",
        "\"errors_by_code\":{\"BAD_RESPONSE\":1,\"UNAVAILABLE\":2}", "\"model\":\"m\\\"x\"",
        "\"buckets\":[]"}) {
    EXPECT_TRUE(HasField(json, field)) << field << " in " << json;
  }
  EXPECT_FALSE(HasField(json, "\"p90_ms\":0.9")) << "a prefix is not a value";
}

TEST(ReportTest, QpsCountsAnswersInsideTheWindowOnly) {
  BenchReport report = SampleReport();
  report.result.completed_ok = 150;  // 50 of the 200 calls sent in the window answered later
  report.result.drain_ns = 1500000000;
  const std::string json = ReportJson(report);
  EXPECT_TRUE(HasField(json, "\"qps\":75.00")) << json;
  EXPECT_TRUE(HasField(json, "\"ok\":200")) << json;
  EXPECT_TRUE(HasField(json, "\"drain_ms\":1500.0000")) << json;
  EXPECT_NE(ReportText(report).find("1500.000 ms after it"), std::string::npos);
}

TEST(ReportTest, BucketsCarryTheirRateAndLag) {
  BenchReport report = SampleReport();
  WindowBucket& b = report.result.buckets.emplace_back();
  b.start_s = 0.5;
  b.rate = 600;
  b.ok = 7;
  b.completed_ok = 6;
  b.delayed_sends = 2;
  b.max_send_lag_ns = 3000000;
  b.latency.Record(4000000);
  const std::string json = ReportJson(report);
  EXPECT_NE(json.find("\"buckets\":[{\"start_s\":0.500,\"rate\":600.000,\"ok\":7,\"errors\":0,"
                      "\"completed_ok\":6,\"p50_ms\":4.0000,\"p99_ms\":null,\"max_ms\":4.0000,"
                      "\"delayed_sends\":2,\"max_send_lag_ms\":3.0000}]"),
            std::string::npos)
      << json;
}

TEST(ReportTest, RefusalsAreTimedApart) {
  BenchReport report = SampleReport();
  report.result.refused.Record(2000000);  // 2 ms
  const std::string json = ReportJson(report);
  EXPECT_TRUE(HasField(json, "\"refused_p50_ms\":2.0000")) << json;
  EXPECT_NE(ReportText(report).find("RESOURCE_EXHAUSTED answered in ms: p50 2.0"),
            std::string::npos);
}

TEST(ReportTest, OpenLoopReportsTheRate) {
  BenchReport report = SampleReport();
  report.run.concurrency = 0;
  report.run.rate = 250;
  const std::string json = ReportJson(report);
  EXPECT_TRUE(HasField(json, "\"rate\":250.000")) << json;
  EXPECT_TRUE(HasField(json, "\"concurrency\":null")) << json;
  EXPECT_TRUE(HasField(json, "\"mode\":\"open\"")) << json;
}

TEST(ReportTest, TextNamesErrorsAndPercentilesWithTheirCount) {
  const std::string text = ReportText(SampleReport());
  EXPECT_NE(text.find("error UNAVAILABLE: 2"), std::string::npos) << text;
  // 100 calls: p90 has 10 above it; p99 and p99.9 would be the maximum, so not printed.
  EXPECT_NE(text.find("latency ms of 100 OK calls"), std::string::npos) << text;
  EXPECT_NE(text.find("p90 0.901  p99 -  p99.9 -  max 1.000"), std::string::npos) << text;
}

TEST(ReportTest, TextPrintsP99FromAThousandCalls) {
  BenchReport report = SampleReport();
  report.result.latency.Reset();
  for (int i = 1; i <= 1000; ++i) report.result.latency.Record(i * 1000);  // 0.001 .. 1 ms
  const std::string text = ReportText(report);
  EXPECT_NE(text.find("p99 0.991  p99.9 -"), std::string::npos) << text;
}

// A bucket of ~100 calls printed a p99 that was its maximum: bucket lines and their JSON
// follow the top line's rule (p99 from 1,000 calls).
TEST(ReportTest, BucketsPrintP99FromAThousandCalls) {
  BenchReport report = SampleReport();
  WindowBucket& few = report.result.buckets.emplace_back();
  for (int i = 1; i <= 999; ++i) few.latency.Record(i * 1000);  // 0.001 .. 0.999 ms
  few.ok = 999;
  WindowBucket& enough = report.result.buckets.emplace_back();
  enough.start_s = 1;
  for (int i = 1; i <= 1000; ++i) enough.latency.Record(i * 1000);  // 0.001 .. 1 ms
  enough.ok = 1000;
  const std::string json = ReportJson(report);
  EXPECT_NE(json.find("\"ok\":999,\"errors\":0,\"completed_ok\":0,\"p50_ms\":0.5007,"
                      "\"p99_ms\":null,\"max_ms\":0.9990,"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"ok\":1000,\"errors\":0,\"completed_ok\":0,\"p50_ms\":0.5007,"
                      "\"p99_ms\":0.9912,\"max_ms\":1.0000,"),
            std::string::npos)
      << json;
  const std::string text = ReportText(report);
  EXPECT_NE(text.find("ok    999  errors     0  answered      0  p50    0.501  p99        -  "
                      "max    0.999 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ok   1000  errors     0  answered      0  p50    0.501  p99    0.991  "
                      "max    1.000 ms"),
            std::string::npos)
      << text;
}

TEST(ReportTest, RefusalsPrintP99FromAThousand) {
  BenchReport report = SampleReport();
  for (int i = 1; i <= 100; ++i) report.result.refused.Record(i * 10000);
  EXPECT_NE(ReportText(report).find("p50 0.501  p99 - (100 calls)"), std::string::npos)
      << ReportText(report);
}

TEST(ReportTest, JsonQuoteEscapes) {
  EXPECT_EQ(JsonQuote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
}

TEST(ReportTest, StatusCodeNames) {
  EXPECT_EQ(StatusCodeName(0), "OK");
  EXPECT_EQ(StatusCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(14), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(99), "CODE_99");
}

}  // namespace
}  // namespace fuserank::bench
