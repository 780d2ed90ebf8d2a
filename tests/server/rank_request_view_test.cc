// ParseRankRequest against protobuf's own parser: every input is parsed by both, which must
// agree on accepting it and, when they do, on every value read (rank_request_view.h).
#include "server/rank_request_view.h"

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fuserank/v1/ranker.pb.h"
#include "gtest/gtest.h"
#include "tests/server/wire_test_util.h"
#include "tests/testing/test_seed.h"

namespace fuserank::server {
namespace {

using testing::wire::Float;
using testing::wire::Len;
using testing::wire::Tag;
using testing::wire::Varint;

// Empty when the view holds what `request` holds, else the first difference.
std::string Difference(const RankRequestView& view, const v1::RankRequest& request) {
  auto same_feature = [&](const FeatureView& f, const v1::Feature& p) {
    if (f.name != p.name()) return false;
    const auto ids = view.feature_ids(f);
    const auto weights = view.feature_weights(f);
    return std::vector<int64_t>(ids.begin(), ids.end()) ==
               std::vector<int64_t>(p.ids().begin(), p.ids().end()) &&
           testing::wire::SameFloats(weights, p.weights());
  };
  if (view.request_id != request.request_id()) return "request_id";
  if (view.model != request.model()) return "model";
  if (view.top_k != request.top_k()) return "top_k";
  if (!testing::wire::SameFloats(view.user_dense, request.user_dense())) return "user_dense";
  if (view.user_features.size() != static_cast<size_t>(request.user_features_size())) {
    return "user_features size";
  }
  for (int k = 0; k < request.user_features_size(); ++k) {
    if (!same_feature(view.user_features[k], request.user_features(k))) return "user feature";
  }
  if (view.candidates.size() != static_cast<size_t>(request.candidates_size())) {
    return "candidates size";
  }
  for (int c = 0; c < request.candidates_size(); ++c) {
    const CandidateView& candidate = view.candidates[c];
    const v1::Candidate& expected = request.candidates(c);
    if (candidate.item_id != expected.item_id()) return "item_id";
    if (!testing::wire::SameFloats(view.dense(candidate), expected.dense())) return "dense";
    const auto features = view.features(candidate);
    if (features.size() != static_cast<size_t>(expected.features_size())) return "features size";
    for (int k = 0; k < expected.features_size(); ++k) {
      if (!same_feature(features[k], expected.features(k))) return "item feature";
    }
  }
  return "";
}

// Both parsers on `bytes`: the same verdict, and the same values when they accept.
void ExpectAgrees(const std::string& bytes, const std::string& what) {
  google::protobuf::LogSilencer quiet;  // protobuf logs each invalid UTF-8 string
  v1::RankRequest request;
  const bool expected = request.ParseFromString(bytes);
  RankRequestView view;
  const bool parsed = ParseRankRequest(bytes, ParseBounds(), &view);
  ASSERT_EQ(parsed, expected) << what << ": protobuf " << (expected ? "accepts" : "refuses")
                              << " these " << bytes.size() << " bytes";
  if (parsed) {
    EXPECT_EQ(Difference(view, request), "") << what;
  }
}

std::string Feature(const std::string& name, const std::vector<int64_t>& ids) {
  std::string packed;
  for (int64_t id : ids) packed += Varint(static_cast<uint64_t>(id));
  return Len(1, name) + Len(2, packed);
}

TEST(RankRequestViewTest, ReadsWhatProtobufReadsFromASerializedRequest) {
  v1::RankRequest request;
  request.set_request_id("r-1");
  request.set_model("demo");
  request.set_top_k(7);
  request.add_user_dense(1.5f);
  v1::Feature* user = request.add_user_features();
  user->set_name("user_0");
  user->add_ids(-1);
  user->add_ids(int64_t{1} << 62);
  user->add_weights(0.5f);
  user->add_weights(2.0f);
  for (int c = 0; c < 3; ++c) {
    v1::Candidate* candidate = request.add_candidates();
    candidate->set_item_id(100 + c);
    candidate->add_dense(c);
    v1::Feature* f = candidate->add_features();
    f->set_name("item_0");
    f->add_ids(c);
  }
  std::string bytes;
  ASSERT_TRUE(request.SerializeToString(&bytes));
  RankRequestView view;
  ASSERT_TRUE(ParseRankRequest(bytes, ParseBounds(), &view));
  EXPECT_EQ(Difference(view, request), "");
  // Reused: a second parse starts from nothing.
  ASSERT_TRUE(ParseRankRequest("", ParseBounds(), &view));
  EXPECT_TRUE(view.candidates.empty());
  EXPECT_TRUE(view.ids.empty());
  EXPECT_EQ(view.request_id, "");
}

TEST(RankRequestViewTest, ConcatenatesPackedAndUnpackedChunksAndKeepsTheLastScalar) {
  const std::string feature = Len(1, "first") + Tag(2, 0) + Varint(5) +
                              Len(2, Varint(6) + Varint(7)) + Tag(3, 5) + Float(1.0f) +
                              Len(3, Float(2.0f)) + Len(1, "item_1") + Tag(2, 0) + Varint(8);
  const std::string candidate = Tag(1, 0) + Varint(3) + Len(3, Float(0.25f)) + Len(2, feature) +
                                Tag(3, 5) + Float(0.5f) + Tag(1, 0) + Varint(4);
  const std::string bytes = Tag(5, 0) + Varint(9) + Len(4, candidate) + Len(3, Float(1.0f)) +
                            Len(4, candidate) + Tag(3, 5) + Float(2.0f) + Tag(5, 0) + Varint(2) +
                            Len(6, "a") + Len(6, "b");
  ExpectAgrees(bytes, "chunks");
  RankRequestView view;
  ASSERT_TRUE(ParseRankRequest(bytes, ParseBounds(), &view));
  EXPECT_EQ(view.top_k, 2u);
  EXPECT_EQ(view.model, "b");
  EXPECT_EQ(view.user_dense.size(), 2u);
  ASSERT_EQ(view.candidates.size(), 2u);
  EXPECT_EQ(view.candidates[1].item_id, 4);
  ASSERT_EQ(view.features(view.candidates[1]).size(), 1u);
  EXPECT_EQ(view.features(view.candidates[1])[0].name, "item_1");
  EXPECT_EQ(view.features(view.candidates[1])[0].ids_size(), 4);
}

TEST(RankRequestViewTest, SkipsUnknownFieldsAndKnownFieldsOfAnotherWireType) {
  const std::string unknown = Tag(15, 0) + Varint(300) + Tag(16, 1) + std::string(8, 'x') +
                              Len(17, "skipped") + Tag(18, 5) + std::string(4, 'y') + Tag(19, 3) +
                              Tag(1, 0) + Varint(1) + Len(2, "in a group") + Tag(20, 3) +
                              Tag(20, 4) + Tag(19, 4);
  const std::string wrong_types = Tag(1, 0) + Varint(1) + Tag(2, 5) + Float(1.0f) + Tag(4, 1) +
                                  std::string(8, 'z') + Tag(6, 0) + Varint(2) + Tag(5, 2) +
                                  Varint(0);
  const std::string feature = Len(1, "item_0") + unknown + Tag(1, 0) + Varint(4) + Tag(2, 1) +
                              std::string(8, 'w') + Len(2, Varint(1));
  const std::string candidate = unknown + Len(2, feature) + Tag(2, 0) + Varint(1) + Len(1, "x");
  ExpectAgrees(unknown + wrong_types + Len(4, candidate) + Len(2, feature) + unknown, "unknown");
}

TEST(RankRequestViewTest, RefusesWhatProtobufRefuses) {
  const std::string good_feature = Feature("item_0", {1, 2});
  const struct {
    const char* what;
    std::string bytes;
  } cases[] = {
      {"truncated varint id", Len(2, Len(1, "u") + Tag(2, 0) + "\x80")},
      {"truncated packed varint", Len(2, Len(2, "\x81\x82"))},
      {"a varint of 11 bytes", Tag(5, 0) + std::string(10, '\x80') + "\x01"},
      {"a varint of 10 bytes is fine", Tag(5, 0) + std::string(9, '\x81') + "\x01"},
      {"a tag of 6 bytes", std::string("\xa8\x80\x80\x80\x80\x00", 6) + Varint(1)},
      {"a tag of 5 bytes is fine", std::string("\xa8\x80\x80\x80\x00", 5) + Varint(1)},
      {"a tag truncated", "\x80"},
      {"tag 0", Tag(5, 0) + Varint(1) + std::string(1, '\0')},
      {"field number 0", Tag(0, 0) + Varint(1)},
      {"field number 0 in a feature", Len(2, Tag(0, 2) + Varint(0))},
      {"wire type 6", Tag(9, 6)},
      {"wire type 7 in a candidate", Len(4, Tag(9, 7))},
      {"an end-group with no group", Tag(9, 4)},
      {"an end-group closing a feature", Len(2, Len(1, "u") + Tag(2, 4))},
      {"a group never closed", Tag(9, 3) + Tag(1, 0) + Varint(1)},
      {"a group closed by another field's end", Tag(9, 3) + Tag(8, 4)},
      {"a group closed by tag 0", Tag(9, 3) + std::string(1, '\0')},
      {"a length past the end", Len(6, "model").substr(0, 5)},
      {"a candidate longer than the request", Tag(4, 2) + Varint(50) + good_feature},
      {"a feature longer than its candidate",
       Len(4, Tag(2, 2) + Varint(static_cast<uint64_t>(good_feature.size()) + 1) + good_feature) +
           Varint(1)},
      {"a length of 6 bytes", Tag(6, 2) + std::string("\x81\x80\x80\x80\x80\x00", 6) + "x"},
      {"a length of 5 bytes is fine", Tag(6, 2) + std::string("\x81\x80\x80\x80\x00", 5) + "x"},
      {"a length at 2^31", Tag(6, 2) + std::string("\x80\x80\x80\x80\x08", 5)},
      {"a length wrapping 32 bits", Tag(6, 2) + std::string("\x81\x80\x80\x80\x10", 5) + "x"},
      {"packed floats not a multiple of 4", Len(3, std::string(6, '\0'))},
      {"an unpacked float truncated", Tag(3, 5) + std::string(3, '\0')},
      {"a fixed64 truncated", Tag(9, 1) + std::string(7, '\0')},
      {"a fixed32 truncated in a feature", Len(2, Tag(9, 5) + std::string(3, '\0'))},
      {"invalid UTF-8 in a name", Len(2, Len(1, "item\xff"))},
      {"a surrogate in request_id", Len(1, "\xed\xa0\x80")},
      {"an overlong form in model", Len(6, "\xc0\xaf")},
      {"past U+10FFFF in a name", Len(2, Len(1, "\xf4\x90\x80\x80"))},
      {"UTF-8 of every length is fine", Len(1, "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80")},
      {"a truncated UTF-8 sequence", Len(6, "\xe2\x82")},
      {"invalid UTF-8 in an unknown field is fine", Len(9, "\xff\xfe")},
  };
  for (const auto& c : cases) ExpectAgrees(c.bytes, c.what);
}

TEST(RankRequestViewTest, StopsPastItsBounds) {
  ParseBounds bounds;
  bounds.user_features = 2;
  bounds.item_features = 1;
  bounds.ids_per_feature = 3;
  bounds.ids = 5;
  RankRequestView view;
  const std::string two_ids = Feature("f", {1, 2});
  EXPECT_TRUE(ParseRankRequest(Len(2, two_ids) + Len(2, two_ids), bounds, &view));
  EXPECT_FALSE(ParseRankRequest(Len(2, "") + Len(2, "") + Len(2, ""), bounds, &view));
  EXPECT_TRUE(ParseRankRequest(Len(4, Len(2, "")) + Len(4, Len(2, "")), bounds, &view));
  EXPECT_FALSE(ParseRankRequest(Len(4, Len(2, "") + Len(2, "")), bounds, &view));
  EXPECT_TRUE(ParseRankRequest(Len(2, Feature("f", {1, 2, 3})), bounds, &view));
  EXPECT_FALSE(ParseRankRequest(Len(2, Feature("f", {1, 2, 3, 4})), bounds, &view));
  EXPECT_FALSE(ParseRankRequest(
      Len(2, Feature("f", {1, 2}) + Tag(2, 0) + Varint(3) + Tag(2, 0) + Varint(4)), bounds, &view));
  // Five ids in all pass; the sixth, in a candidate's feature, does not.
  const std::string five = Len(2, Feature("f", {1, 2, 3})) + Len(4, Len(2, two_ids));
  EXPECT_TRUE(ParseRankRequest(five, bounds, &view));
  EXPECT_FALSE(ParseRankRequest(five + Len(4, Len(2, Feature("f", {9}))), bounds, &view));
}

// Groups nest as deep as protobuf's recursion limit allows, counting the messages around
// them: 100 at the top level, 99 in a candidate or user feature, 98 in a candidate's
// feature.
std::string Groups(int depth) {
  std::string open, close;
  for (int i = 0; i < depth; ++i) {
    open += Tag(9, 3);
    close += Tag(9, 4);
  }
  return open + close;
}

TEST(RankRequestViewTest, NestsGroupsAsDeepAsProtobufAllows) {
  for (int depth : {97, 98, 99, 100, 101}) {
    ExpectAgrees(Groups(depth), "top level");
    ExpectAgrees(Len(4, Groups(depth)), "candidate");
    ExpectAgrees(Len(2, Groups(depth)), "user feature");
    ExpectAgrees(Len(4, Len(2, Groups(depth))), "candidate's feature");
  }
}

// Random requests, built field by field with every wire type, then mutated: a flipped,
// inserted or removed byte, or a cut. Both parsers must agree on each.
TEST(RankRequestViewTest, AgreesWithProtobufOnRandomAndMutatedBytes) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  int accepted = 0;
  constexpr int kInputs = 20000;
  for (int i = 0; i < kInputs; ++i) {
    std::string bytes = testing::wire::RandomRequest(&rng);
    testing::wire::Mutate(&rng, &bytes);
    google::protobuf::LogSilencer quiet;
    v1::RankRequest request;
    accepted += request.ParseFromString(bytes);
    ExpectAgrees(bytes, "random input " + std::to_string(i));
    if (HasFatalFailure()) return;
  }
  // The generator must reach both verdicts often.
  EXPECT_GT(accepted, kInputs / 5);
  EXPECT_LT(accepted, kInputs * 4 / 5);
}

}  // namespace
}  // namespace fuserank::server
