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
  report.result.errors = 3;
  report.result.errors_by_code = {{"UNAVAILABLE", 2}, {"BAD_RESPONSE", 1}};
  for (int i = 1; i <= 100; ++i) report.result.latency.Record(i * 10000);  // 0.01 .. 1 ms
  return report;
}

TEST(ReportTest, JsonIsOneLineWithTheContractKeys) {
  const std::string json = ReportJson(SampleReport());
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_EQ(json.find('\n'), std::string::npos);
  for (const char* key :
       {"\"qps\":100.00", "\"p50_ms\":0.5", "\"p90_ms\":0.9", "\"p99_ms\":0.99", "\"p999_ms\":1.0",
        "\"errors\":3", "\"ok\":200", "\"candidates\":16", "\"concurrency\":4", "\"rate\":null",
        "\"duration_s\":2.000", "\"candidates_per_s\":1600.0", "\"mode\":\"closed\"",
        "\"errors_by_code\":{\"BAD_RESPONSE\":1,\"UNAVAILABLE\":2}", "\"model\":\"m\\\"x\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
}

TEST(ReportTest, RefusalsAreTimedApart) {
  BenchReport report = SampleReport();
  report.result.refused.Record(2000000);  // 2 ms
  const std::string json = ReportJson(report);
  EXPECT_NE(json.find("\"refused_p50_ms\":2.0"), std::string::npos) << json;
  EXPECT_NE(ReportText(report).find("RESOURCE_EXHAUSTED answered in ms: p50 2.0"),
            std::string::npos);
}

TEST(ReportTest, OpenLoopReportsTheRate) {
  BenchReport report = SampleReport();
  report.run.concurrency = 0;
  report.run.rate = 250;
  const std::string json = ReportJson(report);
  EXPECT_NE(json.find("\"rate\":250.000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"concurrency\":null"), std::string::npos) << json;
  EXPECT_NE(json.find("\"mode\":\"open\""), std::string::npos) << json;
}

TEST(ReportTest, TextNamesErrorsAndPercentiles) {
  const std::string text = ReportText(SampleReport());
  EXPECT_NE(text.find("error UNAVAILABLE: 2"), std::string::npos) << text;
  EXPECT_NE(text.find("p99 0.991"), std::string::npos) << text;
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
