// The log formats: text a client sends (a newline, an escape sequence, bytes that are no
// UTF-8) cannot forge a log line or break a JSON line; LogSafe cuts on a character
// boundary; LogRateLimiter lets a burst through and counts what it drops.
#include "server/logging.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/escape_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

// Logs `message` through ConfigureLogging(format) and returns the lines written to stderr.
// (The logger stays configured afterwards: later tests log in that format.)
std::vector<std::string> LogThrough(LogFormat format, const std::string& message) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/logging_test_", getpid());
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(fd, 2);
  ::close(fd);
  LoggingConfig config;
  config.format = format;
  ConfigureLogging(config);
  LogInfoLines(absl::StrCat("rank request_id='", message, "' done"), "");
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
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

}  // namespace
}  // namespace fuserank::server
