// ScanReply: a RESP2 reply is complete, still arriving, or past the limits, judged from
// the bytes so far without buffering what a node announces.
#include "engine/remote/resp_frame.h"

#include <string>

#include "gtest/gtest.h"

namespace fuserank::remote {
namespace {

RespLimits Limits() {
  RespLimits limits;
  limits.max_line = 32;
  limits.max_bulk = 16;
  limits.max_elements = 4;
  limits.max_total_elements = 6;
  limits.max_depth = 2;
  return limits;
}

TEST(RespFrameTest, CompleteRepliesReportTheirLength) {
  const std::string replies[] = {"+OK\r\n",
                                 "-MOVED 1 h:1\r\n",
                                 ":42\r\n",
                                 "$-1\r\n",
                                 "$3\r\nabc\r\n",
                                 "$0\r\n\r\n",
                                 "*0\r\n",
                                 "*-1\r\n",
                                 "*2\r\n:1\r\n$1\r\nx\r\n",
                                 "*2\r\n*1\r\n:1\r\n:2\r\n"};
  for (const std::string& reply : replies) {
    const FrameScan scan = ScanReply(reply + "+next\r\n", Limits());
    EXPECT_EQ(scan.state, FrameState::kComplete) << reply << scan.why;
    EXPECT_EQ(scan.bytes, reply.size()) << reply;
  }
}

TEST(RespFrameTest, EveryPrefixOfAReplyIsIncomplete) {
  const std::string reply = "*2\r\n*2\r\n$4\r\nabcd\r\n:7\r\n$-1\r\n";
  ASSERT_EQ(ScanReply(reply, Limits()).state, FrameState::kComplete);
  for (size_t n = 0; n < reply.size(); ++n) {
    EXPECT_EQ(ScanReply(reply.substr(0, n), Limits()).state, FrameState::kIncomplete) << n;
  }
}

TEST(RespFrameTest, RefusesWhatPassesTheLimitsAsSoonAsItIsAnnounced) {
  const struct {
    std::string bytes;
    std::string why;
  } cases[] = {
      {"$100000000000\r\n", "a bulk string of 100000000000 bytes (at most 16 expected)"},
      {"*2147483647\r\n", "an array of 2147483647 elements (at most 4 expected)"},
      {"*4\r\n*4\r\n", "more than 6 array elements in a reply"},
      {"*1\r\n*1\r\n*1\r\n", "arrays nested deeper than 2"},
      {"+" + std::string(40, 'x'), "a reply line longer than 32 bytes"},
      {"$3\r\nabcde\r\n", "a bulk string without its CRLF"},
      {"$-2\r\n", "a malformed bulk length"},
      {"*x\r\n", "a malformed array length"},
      {"*01\r\n", "a malformed array length"},  // hiredis refuses leading zeros too
      {":12x\r\n", "a malformed integer"},
      {"%2\r\n", "an unknown reply type (byte 37)"},
      {"\r\n", "an empty reply line"},
  };
  for (const auto& c : cases) {
    const FrameScan scan = ScanReply(c.bytes, Limits());
    EXPECT_EQ(scan.state, FrameState::kRefused) << c.bytes;
    EXPECT_EQ(scan.why, c.why) << c.bytes;
  }
}

TEST(RespFrameTest, ALineStillShortOfTheLimitIsIncomplete) {
  EXPECT_EQ(ScanReply("-" + std::string(31, 'e'), Limits()).state, FrameState::kIncomplete);
  EXPECT_EQ(ScanReply("$16\r\n" + std::string(16, 'v'), Limits()).state, FrameState::kIncomplete);
  EXPECT_EQ(ScanReply("$16\r\n" + std::string(16, 'v') + "\r\n", Limits()).state,
            FrameState::kComplete);
}

}  // namespace
}  // namespace fuserank::remote
