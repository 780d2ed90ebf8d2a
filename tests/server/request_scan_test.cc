#include "server/request_scan.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <random>
#include <string>

#include "fuserank/v1/ranker.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

ScanLimits Limits() {
  ScanLimits limits;
  limits.max_candidates = 8;
  limits.max_ids_per_feature = 4;
  limits.max_ids = 20;
  limits.user_tables = 2;
  limits.item_tables = 1;
  limits.model_name = "m";
  return limits;
}

absl::Status Top(const std::string& bytes, RequestShape* shape, int max_candidates = 8) {
  google::protobuf::io::ArrayInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  return ScanTopLevel(&in, max_candidates, shape);
}

absl::Status Deep(const std::string& bytes, RequestShape* shape,
                  const ScanLimits& limits = Limits()) {
  google::protobuf::io::ArrayInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  return ScanFeatures(&in, limits, shape);
}

v1::Feature* AddFeature(google::protobuf::RepeatedPtrField<v1::Feature>* list,
                        const std::string& name, int ids) {
  v1::Feature* feature = list->Add();
  feature->set_name(name);
  for (int i = 0; i < ids; ++i) feature->add_ids(i * 1000003);
  return feature;
}

TEST(RequestScanTest, CountsCandidatesIdsAndFindsTheModel) {
  v1::RankRequest request;
  request.set_model("first");
  AddFeature(request.mutable_user_features(), "u", 3);
  for (int c = 0; c < 5; ++c) AddFeature(request.add_candidates()->mutable_features(), "i", c);
  std::string bytes = request.SerializeAsString();
  v1::RankRequest later;
  later.set_model("second");  // appended: parsing keeps the last
  bytes += later.SerializeAsString();
  RequestShape shape;
  ASSERT_TRUE(Top(bytes, &shape).ok());
  EXPECT_EQ(shape.candidates, 5);
  EXPECT_EQ(shape.model, "second");
  ASSERT_TRUE(Deep(bytes, &shape).ok());
  EXPECT_EQ(shape.ids, 3 + 0 + 1 + 2 + 3 + 4);
}

TEST(RequestScanTest, RefusesMoreCandidatesThanTheLimitWithTheirCount) {
  v1::RankRequest request;
  for (int c = 0; c < 9; ++c) request.add_candidates();
  RequestShape shape;
  const absl::Status status = Top(request.SerializeAsString(), &shape);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "candidates: 9 candidates exceed server.max_candidates (8)");
}

TEST(RequestScanTest, RefusesAFeatureWithTooManyIdsPackedOrNot) {
  v1::RankRequest request;
  AddFeature(request.add_candidates()->mutable_features(), "i", 2);
  AddFeature(request.add_candidates()->mutable_features(), "item_x", 5);
  RequestShape shape;
  absl::Status status = Deep(request.SerializeAsString(), &shape);
  EXPECT_EQ(status.message(),
            "candidates[1].features[0]: 5 ids for table 'item_x' exceed "
            "server.max_ids_per_feature (4)");
  // The same feature with each id as its own (unpacked) field 2, name last.
  std::string feature;
  for (int i = 0; i < 5; ++i) feature += std::string("\x10\x01", 2);
  feature += std::string("\x0a\x02uu", 4);
  const std::string unpacked = std::string("\x12") + static_cast<char>(feature.size()) + feature;
  status = Deep(unpacked, &shape);
  EXPECT_EQ(status.message(),
            "user_features[0]: 5 ids for table 'uu' exceed server.max_ids_per_feature (4)");
}

TEST(RequestScanTest, RefusesFeatureListsFarLongerThanTheModelHasTables) {
  v1::RankRequest request;
  for (int k = 0; k < 18; ++k) request.add_user_features();
  RequestShape shape;
  EXPECT_TRUE(Deep(request.SerializeAsString(), &shape).ok()) << "2 tables + 16 slack: 18";
  request.add_user_features();
  EXPECT_THAT(std::string(Deep(request.SerializeAsString(), &shape).message()),
              HasSubstr("user_features: more than 18 features, but model 'm' has 2 user-side "
                        "tables"));
  v1::RankRequest items;
  for (int k = 0; k < 18; ++k) items.add_candidates();
  for (int k = 0; k < 18; ++k) items.mutable_candidates(3)->add_features();
  EXPECT_THAT(std::string(Deep(items.SerializeAsString(), &shape).message()),
              HasSubstr("candidates[3].features: more than 17 features, but model 'm' has 1 "
                        "item-side tables"));
}

TEST(RequestScanTest, RefusesMoreIdsInAllThanMaxIds) {
  v1::RankRequest request;
  for (int c = 0; c < 6; ++c) AddFeature(request.add_candidates()->mutable_features(), "i", 4);
  RequestShape shape;
  const absl::Status status = Deep(request.SerializeAsString(), &shape);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("more than engine.max_batch_ids (20)"));
}

TEST(RequestScanTest, SkipsUnknownFieldsOfEveryWireTypeAsParsingDoes) {
  // Field 15 as varint, fixed64, length-delimited, group and fixed32, at the top level, in a
  // candidate and in a feature; and known fields with an unexpected wire type.
  const std::string unknown = std::string("\x78\x05", 2) +                     // 15 varint
                              std::string("\x79", 1) + std::string(8, '\0') +  // 15 fixed64
                              std::string("\x7a\x02zz", 4) +                   // 15 bytes
                              std::string("\x7b\x08\x01\x7c", 4) +             // 15 group
                              std::string("\x7d", 1) + std::string(4, '\0');   // 15 fixed32
  const std::string feature = std::string("\x0a\x01i", 3) + std::string("\x12\x02\x01\x02", 4) +
                              unknown + std::string("\x0d\0\0\0\0", 5);  // name as fixed32
  const std::string candidate =
      unknown + std::string("\x12") + static_cast<char>(feature.size()) + feature;
  const std::string bytes = unknown + std::string("\x22") + static_cast<char>(candidate.size()) +
                            candidate + std::string("\x30\x07", 2);  // model (6) as varint
  v1::RankRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  ASSERT_EQ(parsed.candidates_size(), 1);
  RequestShape shape;
  ASSERT_TRUE(Top(bytes, &shape).ok());
  ASSERT_TRUE(Deep(bytes, &shape).ok());
  EXPECT_EQ(shape.candidates, 1);
  EXPECT_EQ(shape.ids, parsed.candidates(0).features(0).ids_size());
  EXPECT_EQ(shape.model, "");
}

TEST(RequestScanTest, AgreesWithTheParserOnRandomRequests) {
  const uint64_t seed = 20261201;
  std::mt19937_64 rng(seed);
  ScanLimits limits = Limits();
  limits.max_candidates = 1000;
  limits.max_ids_per_feature = 1000;
  limits.max_ids = 1 << 20;
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << ", trial " << trial);
    v1::RankRequest request;
    const int candidates = static_cast<int>(rng() % 20);
    int64_t ids = 0;
    for (int k = 0; k < static_cast<int>(rng() % 3); ++k) {
      ids += AddFeature(request.mutable_user_features(), "u", rng() % 9)->ids_size();
    }
    for (int c = 0; c < candidates; ++c) {
      v1::Candidate* candidate = request.add_candidates();
      candidate->set_item_id(static_cast<int64_t>(rng()));
      if (rng() % 2) ids += AddFeature(candidate->mutable_features(), "i", rng() % 9)->ids_size();
      for (int d = 0; d < static_cast<int>(rng() % 4); ++d) candidate->add_dense(0.5f);
    }
    if (rng() % 2) request.set_model("m" + std::to_string(rng() % 10));
    const std::string bytes = request.SerializeAsString();
    RequestShape shape;
    ASSERT_TRUE(Top(bytes, &shape, limits.max_candidates).ok());
    ASSERT_TRUE(Deep(bytes, &shape, limits).ok());
    EXPECT_EQ(shape.candidates, request.candidates_size());
    EXPECT_EQ(shape.ids, ids);
    EXPECT_EQ(shape.model, request.model());
  }
}

TEST(RequestScanTest, RefusesBytesThatAreNoRankRequest) {
  v1::RankRequest request;
  AddFeature(request.add_candidates()->mutable_features(), "i", 3);
  const std::string bytes = request.SerializeAsString();
  RequestShape shape;
  for (const std::string& bad : {bytes.substr(0, bytes.size() - 2), std::string("\x00\x01", 2),
                                 std::string("\x22\xff\xff\xff\xff\x0f", 6)}) {
    v1::RankRequest parsed;
    EXPECT_FALSE(parsed.ParseFromString(bad));
    const absl::Status top = Top(bad, &shape);
    const absl::Status deep = Deep(bad, &shape);
    EXPECT_FALSE(top.ok() && deep.ok()) << "accepted bytes the parser refuses";
    if (!top.ok()) {
      EXPECT_THAT(std::string(top.message()), HasSubstr("not a valid fuserank.v1.RankRequest"));
    }
  }
}

TEST(RequestScanTest, RefusesAModelNameThatIsNotUtf8EvenIfALaterCopyIs) {
  // Each copy of a field must be UTF-8 for protobuf, though the last one wins; the model is
  // looked up from the scan, so this is INVALID_ARGUMENT, not a model that is not loaded.
  const std::string model_field = std::string("\x32\x02\xff\xfe", 4);
  const std::string good_model = std::string("\x32\x01", 2) + "m";
  RequestShape shape;
  for (const std::string& bytes : {model_field, model_field + good_model}) {
    v1::RankRequest parsed;
    EXPECT_FALSE(parsed.ParseFromString(bytes));
    const absl::Status top = Top(bytes, &shape);
    EXPECT_EQ(top.code(), absl::StatusCode::kInvalidArgument) << top;
    EXPECT_THAT(std::string(top.message()), HasSubstr("model is not valid UTF-8"));
  }
  EXPECT_TRUE(Top(good_model, &shape).ok());
  EXPECT_EQ(shape.model, "m");
}

}  // namespace
}  // namespace fuserank::server
