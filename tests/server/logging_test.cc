// The log formats: text a client sends (a newline, an escape sequence, bytes that are no
// UTF-8) cannot forge a log line or break a JSON line; LogSafe cuts on a character
// boundary; LogRateLimiter lets a burst through and counts what it drops.
#include "server/logging.h"

#include <fcntl.h>
#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/escape_text.h"
#include "fuserank/v1/admin.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

// Runs `log` after ConfigureLogging(format) and returns the lines written to stderr. (The
// logger stays configured afterwards: later tests log in that format.)
std::vector<std::string> LinesOf(LogFormat format, const std::function<void()>& log) {
  const std::string path = fuserank::testing::MakeTempDir("logging_test") + "/stderr.txt";
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(fd, 2);
  ::close(fd);
  LoggingConfig config;
  config.format = format;
  ConfigureLogging(config);
  log();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

std::vector<std::string> LogThrough(LogFormat format, const std::string& message) {
  return LinesOf(format,
                 [&] { LogInfoLines(absl::StrCat("rank request_id='", message, "' done"), ""); });
}

const std::string kForged = "r1\n[2030-01-01 00:00:00.000] [info] admin ok\x1b[2K\xff\xfe";

TEST(LoggingTest, TextLinesCannotBeForged) {
  const std::vector<std::string> lines = LogThrough(LogFormat::kText, kForged);
  ASSERT_EQ(lines.size(), 1u) << absl::StrJoin(lines, "\n");
  EXPECT_THAT(lines[0], HasSubstr("request_id='r1\\n[2030-01-01 00:00:00.000] [info] admin "
                                  "ok\\x1b[2K\\xff\\xfe' done"));
  EXPECT_TRUE(engine::IsPrintableUtf8(lines[0]));
}

TEST(LoggingTest, JsonLinesStayValidJson) {
  const std::vector<std::string> lines = LogThrough(LogFormat::kJson, kForged + "\"}");
  ASSERT_EQ(lines.size(), 1u) << absl::StrJoin(lines, "\n");
  EXPECT_THAT(lines[0], HasSubstr(R"(request_id='r1\n[2030-01-01 00:00:00.000] [info] admin )"
                                  R"(ok\u001b[2K\\xff\\xfe\"}' done)"));
  EXPECT_TRUE(engine::IsPrintableUtf8(lines[0]));  // no raw control or non-UTF-8 byte
}

TEST(LoggingTest, AHugeMessageIsCut) {
  const std::vector<std::string> lines =
      LogThrough(LogFormat::kText, std::string(kMaxLogMessageBytes * 2, 'x'));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LT(lines[0].size(), kMaxLogMessageBytes + 100);
  EXPECT_THAT(lines[0], ::testing::EndsWith("..."));
}

TEST(LoggingTest, LogSafeEscapesAndCutsOnACharacterBoundary) {
  EXPECT_EQ(LogSafe("model\n\xc3\xa9\xc3\xa9", 8), "model\\n\xc3\xa9...");
  EXPECT_EQ(LogSafe("ok"), "ok");
}

// The access log quotes request_id and model as field='value': a ' in a client's value is
// written \x27, so it cannot end its field and forge model= or code= after it.
TEST(LoggingTest, LogQuotedValuesCannotCloseTheirQuotesAndAddFields) {
  const std::string forged = "x' model='prod' code=OK z='";
  EXPECT_EQ(LogQuoted(forged), "x\\x27 model=\\x27prod\\x27 code=OK z=\\x27");
  const std::string line = absl::StrCat("rank request_id='", LogQuoted(forged, 128), "' model='",
                                        LogQuoted("ctr", 128), "' code=NOT_FOUND");
  EXPECT_EQ(std::count(line.begin(), line.end(), '\''), 4) << line;
  EXPECT_THAT(line, HasSubstr("' model='ctr' code=NOT_FOUND"));
  // A backslash of the text stays doubled, so \x27 reads back as one ' only.
  EXPECT_EQ(LogQuoted("a\\'b"), "a\\\\\\x27b");
  // Cut on input bytes, as LogSafe.
  EXPECT_EQ(LogQuoted("''''", 2), "\\x27\\x27...");
}

// Text quoted by the caller (LogSafe, LogQuoted) is printable already: a text line writes
// its escapes once, so \x27 and \n read back as the client's ' and newline. (Both formats.)
TEST(LoggingTest, QuotedTextIsEscapedOnceInBothFormats) {
  const std::string quoted = LogQuoted("a' model=x code=OK\nfake\\", 128);
  const std::string line = absl::StrCat("rank request_id='", quoted, "' code=OK");
  const std::vector<std::string> text = LinesOf(LogFormat::kText, [&] { LogInfoLines(line, ""); });
  ASSERT_EQ(text.size(), 1u) << absl::StrJoin(text, "\n");
  EXPECT_THAT(text[0], HasSubstr("request_id='a\\x27 model=x code=OK\\nfake\\\\' code=OK"));
  const std::vector<std::string> json = LinesOf(LogFormat::kJson, [&] { LogInfoLines(line, ""); });
  ASSERT_EQ(json.size(), 1u) << absl::StrJoin(json, "\n");
  // JSON doubles each backslash, which a JSON reader undoes.
  EXPECT_THAT(json[0], HasSubstr(R"(request_id='a\\x27 model=x code=OK\\nfake\\\\' code=OK)"));
}

TEST(LogRateLimiterTest, LetsABurstThroughAndCountsTheRest) {
  LogRateLimiter limiter(3, absl::Hours(1));
  uint64_t dropped = 99;
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += limiter.Allow(&dropped) ? 1 : 0;
  EXPECT_EQ(allowed, 3);
  EXPECT_EQ(dropped, 0u);
  LogRateLimiter fast(1, absl::ZeroDuration());  // every call opens a new window
  EXPECT_TRUE(fast.Allow(&dropped));
  EXPECT_TRUE(fast.Allow(&dropped));
}

// A message gRPC cannot parse makes libprotobuf log: that line comes through the logger
// (JSON here, escaped), not as a raw "[libprotobuf ERROR ...]" line beside the JSON.
TEST(LoggingTest, ProtobufLinesGoThroughTheLogger) {
  const std::vector<std::string> lines = LinesOf(LogFormat::kJson, [] {
    v1::GetHotRowsRequest request;
    EXPECT_FALSE(request.ParseFromString(std::string("\x12\x02\xff\xfe", 4)));
  });
  ASSERT_EQ(lines.size(), 1u) << absl::StrJoin(lines, "\n");
  EXPECT_THAT(lines[0], HasSubstr(R"("level":"warning")"));
  EXPECT_THAT(lines[0], HasSubstr("libprotobuf: "));
  EXPECT_THAT(lines[0], HasSubstr("invalid UTF-8"));
  EXPECT_TRUE(engine::IsPrintableUtf8(lines[0]));
}

// gRPC core's lines too (a client triggers some at will: every compressed request logs one
// at error level), rate-limited to 10 a second.
TEST(LoggingTest, GrpcCoreLinesGoThroughTheLoggerRateLimited) {
  grpc_init();  // gRPC core writes nothing before it
  const std::vector<std::string> lines = LinesOf(LogFormat::kJson, [] {
    for (int i = 0; i < 25; ++i) gpr_log(GPR_ERROR, "line %d from \x1b core", i);
  });
  ASSERT_GE(lines.size(), 1u);
  EXPECT_LE(lines.size(), 10u) << absl::StrJoin(lines, "\n");
  EXPECT_THAT(lines[0], HasSubstr(R"("level":"error")"));
  EXPECT_THAT(lines[0], HasSubstr("grpc: line 0 from \\u001b core"));
  EXPECT_TRUE(engine::IsPrintableUtf8(lines[0]));
  grpc_shutdown();
}

}  // namespace
}  // namespace fuserank::server
