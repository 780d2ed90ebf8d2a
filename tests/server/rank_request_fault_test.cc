// DescribeRankRequestFault names the first field of a RankRequest's bytes that protobuf
// refuses, by its path, and finds nothing in bytes protobuf parses (the random-bytes test
// of request_decoder_wire_test.cc checks that against protobuf on 20,000 inputs).
#include "server/rank_request_fault.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/wire_test_util.h"

namespace fuserank::server {
namespace {

using testing::wire::Float;
using testing::wire::Len;
using testing::wire::Tag;
using testing::wire::Varint;

std::string Feature(const std::string& name, const std::string& packed_ids) {
  return Len(1, name) + Len(2, packed_ids);
}

TEST(RankRequestFaultTest, AValidRequestHasNone) {
  const std::string wire = Len(1, "req-1") + Len(2, Feature("user_id", Varint(7))) +
                           Len(4, Tag(1, 0) + Varint(5) + Len(2, Feature("item_id", Varint(3))) +
                                      Len(3, Float(1.0f) + Float(2.0f))) +
                           Tag(5, 0) + Varint(10) + Len(6, "demo");
  EXPECT_EQ(DescribeRankRequestFault(wire), "");
  EXPECT_EQ(DescribeRankRequestFault(""), "");
}

TEST(RankRequestFaultTest, NamesTheFieldAndWhatIsWrong) {
  const std::string good_candidate = Len(4, Tag(1, 0) + Varint(5));
  struct Case {
    std::string wire;
    std::string fault;
  };
  const Case cases[] = {
      {Len(1, "\xc0\x80"), "request_id is not valid UTF-8"},
      {Len(6, "demo\xff"), "model is not valid UTF-8"},
      {good_candidate + good_candidate + Len(4, Len(2, Feature("\xff\xfe", Varint(1)))),
       "candidates[2].features[0].name is not valid UTF-8"},
      {Len(2, Feature("user_id", Varint(1))) + Len(2, Len(3, std::string(6, '\0'))),
       "user_features[1].weights (packed floats) is 6 bytes, not a multiple of 4"},
      {Len(3, std::string(5, '\0')), "user_dense (packed floats) is 5 bytes, not a multiple of 4"},
      {Len(4, Len(2, Len(2, "\x80"))),
       "candidates[0].features[0].ids (packed) holds a malformed "
       "varint"},
      {Tag(5, 0) + "\x80", "top_k is a malformed varint"},
      {Len(4, Tag(3, 5) + "ab"), "candidates[0].dense is truncated (a float takes 4 bytes)"},
      {Tag(1, 2) + Varint(10) + "abc",
       "request_id is truncated (its length runs past the end "
       "of its message)"},
      {Len(4, Tag(1, 4)), "candidates[0]: an end-group tag where a field was expected"},
      {std::string(1, '\0'), "the request: a field tag of 0 where a field was expected"},
      {Tag(9, 2) + Varint(100), "the request: unknown field 9 is malformed or truncated"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DescribeRankRequestFault(c.wire), c.fault);
  }
}

TEST(RankRequestFaultTest, AKnownNumberOfAnotherWireTypeIsAnUnknownField) {
  // model as a varint: protobuf skips it as an unknown field, as the parse does; so is a
  // singular varint (top_k) sent length-delimited, which only repeated ones may be.
  EXPECT_EQ(DescribeRankRequestFault(Tag(6, 0) + Varint(300)), "");
  EXPECT_EQ(DescribeRankRequestFault(Len(5, "\x80")), "");
  EXPECT_EQ(DescribeRankRequestFault(Tag(6, 0) + "\x80"),
            "the request: unknown field 6 is malformed or truncated");
}

TEST(RankRequestFaultTest, TheStatusCarriesTheFault) {
  const absl::Status status = NotARankRequest(Len(6, "\xff"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "the request is not a valid fuserank.v1.RankRequest: model is not valid UTF-8");
}

}  // namespace
}  // namespace fuserank::server
