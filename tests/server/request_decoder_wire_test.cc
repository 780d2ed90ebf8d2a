// RequestDecoder::AppendWire, the decode straight from the wire, against the decode it
// replaced: protobuf's parse of the same bytes, then the old message-based decoder
// (bench/decode/baseline_rank_decoder.h). Both must give the same status, word for word,
// and the same batch, on valid requests, on requests that break SPEC section 3 and on
// bytes that are no RankRequest. And the parse within the scan's bounds against the scan.
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "bench/decode/baseline_rank_decoder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/rank_request_view.h"
#include "server/request_decoder.h"
#include "server/request_scan.h"
#include "tests/server/wire_test_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::server {
namespace {

using ::testing::ElementsAre;

// The model of request_decoder_test.cc: user_0 (100 rows), user_1 (50 rows, oov: reject),
// item_0 (100 rows), item_1 (10 rows, oov: reject); dense {user: 2, item: 3}.
std::shared_ptr<const engine::Model> WireModel() {
  engine::ModelSpec spec = fuserank::testing::SmallSpec(2, 2, 100, 4);
  spec.tables[1].rows = 50;
  spec.tables[1].oov = engine::Oov::kReject;
  spec.tables[3].rows = 10;
  spec.tables[3].oov = engine::Oov::kReject;
  auto model = fuserank::testing::BuildTestModel(fuserank::testing::MakeRandomModel(spec, 1));
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

constexpr DecodeLimits kLimits{/*max_candidates=*/8, /*max_ids_per_feature=*/4,
                               /*max_ids=*/24};

std::string OneCandidate() {
  v1::RankRequest request;
  request.set_request_id("r-7");
  request.set_top_k(1);
  request.add_user_dense(1.0f);
  request.add_user_dense(2.0f);
  v1::Candidate* c = request.add_candidates();
  c->set_item_id(77);
  for (float d : {0.1f, 0.2f, 0.3f}) c->add_dense(d);
  v1::Feature* f = c->add_features();
  f->set_name("item_0");
  f->add_ids(105);
  return request.SerializeAsString();
}

bool SameBatch(const engine::Batch& a, const engine::Batch& b) {
  return a.model == b.model && a.candidate_begin == b.candidate_begin && a.top_k == b.top_k &&
         a.user.bag_begin == b.user.bag_begin && a.user.rows == b.user.rows &&
         a.user.weights == b.user.weights && a.item.bag_begin == b.item.bag_begin &&
         a.item.rows == b.item.rows && a.item.weights == b.item.weights &&
         a.user_dense == b.user_dense && a.item_dense == b.item_dense;
}

TEST(RequestDecoderWireTest, AppendsItemIdsOnlyOnSuccess) {
  const RequestDecoder decoder(WireModel(), kLimits);
  const std::string wire = OneCandidate();
  engine::Batch batch;
  std::vector<int64_t> item_ids = {5};
  ASSERT_TRUE(decoder.AppendWire(wire, &batch, &item_ids).ok());
  EXPECT_THAT(item_ids, ElementsAre(5, 77));
  EXPECT_THAT(batch.item.rows, ElementsAre(5));  // 105 modulo 100
  EXPECT_THAT(batch.top_k, ElementsAre(1u));

  // Valid bytes, an invalid request: nothing appended.
  v1::RankRequest bad;
  ASSERT_TRUE(bad.ParseFromString(wire));
  bad.mutable_candidates(0)->mutable_features(0)->set_name("country");
  const engine::Batch before = batch;
  EXPECT_FALSE(decoder.AppendWire(bad.SerializeAsString(), &batch, &item_ids).ok());
  EXPECT_THAT(item_ids, ElementsAre(5, 77));
  EXPECT_TRUE(SameBatch(batch, before));

  // Bytes that are no RankRequest: the parse's message.
  const absl::Status status =
      decoder.AppendWire(wire.substr(0, wire.size() - 1), &batch, &item_ids);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  // The request's last field is cut short; the message says which.
  EXPECT_EQ(status.message(),
            "the request is not a valid fuserank.v1.RankRequest: top_k is a malformed varint");
  EXPECT_EQ(status, NotARankRequest(wire.substr(0, wire.size() - 1)));
  EXPECT_TRUE(SameBatch(batch, before));
}

// The old path's message for bytes protobuf refuses; the new one adds the fault.
const std::string kNotARequest = "the request is not a valid fuserank.v1.RankRequest: ";

// The old path on `wire`: protobuf's parse (the server's message when it fails), then the
// old decoder; the candidates' item ids on success.
absl::Status OldDecode(const bench::BaselineRankDecoder& decoder, const std::string& wire,
                       engine::Batch* batch, std::vector<int64_t>* item_ids) {
  google::protobuf::LogSilencer quiet;
  v1::RankRequest request;
  if (!request.ParseFromString(wire)) return absl::InvalidArgumentError(kNotARequest);
  const absl::Status status = decoder.Append(request, batch);
  if (status.ok()) {
    for (const v1::Candidate& c : request.candidates()) item_ids->push_back(c.item_id());
  }
  return status;
}

TEST(RequestDecoderWireTest, GivesTheOldDecodersStatusAndBatchOnRandomBytes) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::shared_ptr<const engine::Model> model = WireModel();
  const RequestDecoder decoder(model, kLimits);
  const bench::BaselineRankDecoder old_decoder(model, kLimits);
  const std::string first = OneCandidate();
  int ok = 0, invalid = 0, unparsed = 0, bounds = 0;
  constexpr int kInputs = 20000;
  for (int i = 0; i < kInputs; ++i) {
    std::string wire = fuserank::testing::wire::RandomRequest(&rng);
    fuserank::testing::wire::Mutate(&rng, &wire);
    // After a valid request, so errors must also leave an earlier request intact.
    engine::Batch got, expected;
    std::vector<int64_t> got_ids, expected_ids;
    ASSERT_TRUE(decoder.AppendWire(first, &got, &got_ids).ok());
    ASSERT_TRUE(OldDecode(old_decoder, first, &expected, &expected_ids).ok());
    const absl::Status status = decoder.AppendWire(wire, &got, &got_ids);
    const absl::Status old = OldDecode(old_decoder, wire, &expected, &expected_ids);
    ASSERT_EQ(status.code(), old.code()) << "input " << i << ": " << status << " vs " << old;
    // Bytes protobuf refuses are described by their first fault (rank_request_fault.h),
    // which it never finds in bytes protobuf parses; every other message is the old one.
    v1::RankRequest message;
    const bool protobuf_parses = [&] {
      google::protobuf::LogSilencer quiet;
      return message.ParseFromString(wire);
    }();
    const std::string fault = DescribeRankRequestFault(wire);
    ASSERT_EQ(fault.empty(), protobuf_parses) << "input " << i << ": " << fault;
    if (old.message() == kNotARequest) {
      ASSERT_EQ(status.message(), kNotARequest + fault) << "input " << i;
    } else {
      ASSERT_EQ(status.message(), old.message()) << "input " << i;
    }
    ASSERT_TRUE(SameBatch(got, expected)) << "input " << i << ": " << status;
    ASSERT_EQ(got_ids, expected_ids) << "input " << i;
    // Bytes that parse within the scan's bounds pass the scan, with the view's ids; bytes
    // that parse only past them are refused by it.
    RankRequestView view;
    const bool whole = ParseRankRequest(wire, ParseBounds(), &view);
    const bool bounded = ParseRankRequest(wire, decoder.parse_bounds(), &view);
    RequestShape scanned;
    google::protobuf::io::ArrayInputStream bytes(wire.data(), static_cast<int>(wire.size()));
    const absl::Status scan = ScanFeatures(&bytes, decoder.scan_limits(), &scanned);
    if (bounded) {
      ASSERT_TRUE(whole) << "input " << i;
      ASSERT_TRUE(scan.ok()) << "input " << i << ": " << scan;
      ASSERT_EQ(scanned.ids, static_cast<int64_t>(view.ids.size())) << "input " << i;
    } else if (whole) {
      ASSERT_FALSE(scan.ok()) << "input " << i << ": the parse stopped at its bounds";
      ++bounds;
    }
    if (status.ok()) {
      ++ok;
    } else if (absl::StartsWith(status.message(), "the request is not")) {
      ++unparsed;
    } else {
      ++invalid;
    }
  }
  // The generator must reach every verdict often.
  EXPECT_GT(ok, kInputs / 100);
  EXPECT_GT(invalid, kInputs / 5);
  EXPECT_GT(unparsed, kInputs / 10);
  EXPECT_GT(bounds, kInputs / 100);  // the parse stopped at the scan's limits
}

}  // namespace
}  // namespace fuserank::server
