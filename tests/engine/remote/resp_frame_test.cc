// ScanReply: a RESP2 reply is complete, still arriving, or past the limits, judged from
// the bytes so far without buffering what a node announces. SkipBulk and DropBulk: a bulk
// string of an unwanted length goes by as its bytes arrive.
#include "engine/remote/resp_frame.h"

#include <hiredis/hiredis.h>

#include <string>
#include <string_view>

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

// A connection's reader without a connection: all SkipBulk and DropBulk use.
class ReaderContext {
 public:
  ReaderContext() { context_.reader = redisReaderCreate(); }
  ~ReaderContext() { redisReaderFree(context_.reader); }
  void Feed(std::string_view bytes) {
    ASSERT_EQ(redisReaderFeed(context_.reader, bytes.data(), bytes.size()), REDIS_OK);
  }
  std::string_view buffered() const {
    return {context_.reader->buf + context_.reader->pos,
            context_.reader->len - context_.reader->pos};
  }
  redisContext* get() { return &context_; }

 private:
  redisContext context_{};
};

TEST(RespFrameTest, ABulkOfAnUnwantedLengthGoesByAsItArrives) {
  ReaderContext c;
  c.Feed("$12\r\nabcd");
  size_t announced = 0;
  EXPECT_FALSE(SkipBulk(c.get(), Limits(), 12, &announced));  // the length wanted
  ASSERT_TRUE(SkipBulk(c.get(), Limits(), 3, &announced));
  EXPECT_EQ(announced, 12u);
  size_t left = announced + 2;
  EXPECT_EQ(DropBulk(c.get(), &left), NextState::kMore);
  EXPECT_EQ(left, 10u);
  EXPECT_EQ(c.buffered(), "");  // dropped, not kept
  c.Feed("efghijkl\r");
  EXPECT_EQ(DropBulk(c.get(), &left), NextState::kMore);
  EXPECT_EQ(left, 1u);
  c.Feed("\n+OK\r\n");
  EXPECT_EQ(DropBulk(c.get(), &left), NextState::kReply);
  EXPECT_EQ(left, 0u);
  EXPECT_EQ(c.buffered(), "+OK\r\n");  // the next reply, untouched
}

TEST(RespFrameTest, ABulkThatGoesByMustEndWithItsCrlf) {
  ReaderContext c;
  c.Feed("$2\r\nabXY");
  size_t announced = 0;
  ASSERT_TRUE(SkipBulk(c.get(), Limits(), 3, &announced));
  size_t left = announced + 2;
  EXPECT_EQ(DropBulk(c.get(), &left), NextState::kRefused);
}

TEST(RespFrameTest, SkipBulkLeavesWhatIsNotAnUnwantedBulk) {
  for (const std::string_view bytes : {"$-1\r\n", "+OK\r\n", "-MOVED 1 h:1\r\n", "$5",
                                       "$100\r\n" /* past max_bulk: NextReply refuses it */}) {
    ReaderContext c;
    c.Feed(bytes);
    size_t announced = 0;
    EXPECT_FALSE(SkipBulk(c.get(), Limits(), 3, &announced)) << bytes;
    EXPECT_EQ(c.buffered(), bytes);
  }
}

}  // namespace
}  // namespace fuserank::remote
