// RequestDecoder::AppendCanonical, the one-pass decode of the shape clients send, against
// the general path it stands in for (ParseRankRequest, then AppendParsed): whenever it
// accepts bytes, the general path accepts them too, with the same batch, item ids, ids,
// top_k and request id; whenever it gives up, the batch and item ids are as they were. On
// requests protobuf serialises with each side's tables in the model's order it accepts
// exactly the valid ones, so clients' requests do take it.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/rank_request_view.h"
#include "server/request_decoder.h"
#include "tests/server/wire_test_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::server {
namespace {

using ::testing::ElementsAre;
namespace wire = fuserank::testing::wire;

// The model of request_decoder_test.cc: user_0 (100 rows), user_1 (50 rows, oov: reject),
// item_0 (100 rows), item_1 (10 rows, oov: reject); dense {user: 2, item: 3}.
fuserank::testing::TestModel CanonicalTestModel() {
  engine::ModelSpec spec = fuserank::testing::SmallSpec(2, 2, 100, 4);
  spec.tables[1].rows = 50;
  spec.tables[1].oov = engine::Oov::kReject;
  spec.tables[3].rows = 10;
  spec.tables[3].oov = engine::Oov::kReject;
  return fuserank::testing::MakeRandomModel(spec, 1);
}

std::shared_ptr<const engine::Model> Build(const fuserank::testing::TestModel& test_model) {
  auto model = fuserank::testing::BuildTestModel(test_model);
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

constexpr DecodeLimits kLimits{/*max_candidates=*/8, /*max_ids_per_feature=*/4,
                               /*max_ids=*/24};

bool SameBatch(const engine::Batch& a, const engine::Batch& b) {
  return a.model == b.model && a.candidate_begin == b.candidate_begin && a.top_k == b.top_k &&
         a.user.bag_begin == b.user.bag_begin && a.user.rows == b.user.rows &&
         a.user.weights == b.user.weights && a.user.keys == b.user.keys &&
         a.item.bag_begin == b.item.bag_begin && a.item.rows == b.item.rows &&
         a.item.weights == b.item.weights && a.item.keys == b.item.keys &&
         a.user_dense == b.user_dense && a.item_dense == b.item_dense;
}

// A valid request with every field the canonical shape holds.
v1::RankRequest FullRequest() {
  v1::RankRequest request;
  request.set_request_id("r-1");
  request.set_top_k(2);
  for (const char* name : {"user_0", "user_1"}) {
    v1::Feature* f = request.add_user_features();
    f->set_name(name);
    f->add_ids(7);
  }
  request.mutable_user_features(1)->add_weights(0.5f);
  request.add_user_dense(1.0f);
  request.add_user_dense(2.0f);
  for (int c = 0; c < 3; ++c) {
    v1::Candidate* candidate = request.add_candidates();
    candidate->set_item_id(100 + c);
    v1::Feature* f = candidate->add_features();
    f->set_name("item_0");
    f->add_ids(105 + c);  // past the 100 rows: modulo
    f->add_ids(3);
    f = candidate->add_features();
    f->set_name("item_1");
    f->add_ids(c);
    for (float d : {0.1f, 0.2f, 0.3f}) candidate->add_dense(d * static_cast<float>(c + 1));
  }
  return request;
}

// What the general path makes of `wire` after `batch`'s requests.
struct General {
  absl::Status status;
  engine::Batch batch;
  std::vector<int64_t> item_ids;
  RankRequestView view;
};

void DecodeGeneral(const RequestDecoder& decoder, const std::string& wire, General* out) {
  if (!ParseRankRequest(wire, ParseBounds(), &out->view)) {
    out->status = NotARankRequest(wire);
    return;
  }
  out->status = decoder.AppendParsed(out->view, &out->batch, &out->item_ids);
}

// Both paths on `wire`, each after the same first request; returns whether the canonical
// path took it, after checking it against the general path.
bool CheckAgainstGeneral(const RequestDecoder& decoder, const std::string& first,
                         const std::string& wire, const std::string& label) {
  engine::Batch batch;
  std::vector<int64_t> item_ids;
  EXPECT_TRUE(decoder.AppendWire(first, &batch, &item_ids).ok());
  General general;
  general.batch = batch;
  general.item_ids = item_ids;
  const engine::Batch before = batch;
  const std::vector<int64_t> ids_before = item_ids;
  DecodeGeneral(decoder, wire, &general);
  CanonicalRequest read;
  read.ids = -1;
  if (!decoder.AppendCanonical(wire, &batch, &item_ids, &read)) {
    EXPECT_TRUE(SameBatch(batch, before)) << label << ": gave up, but changed the batch";
    EXPECT_EQ(item_ids, ids_before) << label;
    return false;
  }
  EXPECT_TRUE(general.status.ok())
      << label << ": accepted what the parse refuses (" << general.status << ")";
  if (!general.status.ok()) return true;
  EXPECT_TRUE(SameBatch(batch, general.batch)) << label;
  EXPECT_EQ(item_ids, general.item_ids) << label;
  const RankRequestView& view = general.view;
  EXPECT_EQ(read.ids, static_cast<int64_t>(view.ids.size())) << label;
  EXPECT_EQ(read.top_k, view.top_k) << label;
  EXPECT_EQ(read.request_id, view.request_id) << label;
  EXPECT_EQ(read.candidates, static_cast<int>(view.candidates.size())) << label;
  return true;
}

TEST(RequestDecoderCanonicalTest, ReadsWhatClientsSendIntoTheSameBatch) {
  const RequestDecoder decoder(Build(CanonicalTestModel()), kLimits);
  const std::string first = FullRequest().SerializeAsString();
  EXPECT_TRUE(CheckAgainstGeneral(decoder, first, first, "full"));

  engine::Batch batch;
  std::vector<int64_t> item_ids;
  CanonicalRequest read;
  ASSERT_TRUE(decoder.AppendCanonical(first, &batch, &item_ids, &read));
  EXPECT_EQ(read.request_id, "r-1");
  EXPECT_EQ(read.top_k, 2u);
  EXPECT_EQ(read.candidates, 3);
  EXPECT_EQ(read.ids, 2 + 3 * 3);
  EXPECT_THAT(item_ids, ElementsAre(100, 101, 102));
  EXPECT_THAT(batch.user.weights, ElementsAre(1.0f, 0.5f));
  EXPECT_THAT(batch.item.rows, ElementsAre(5, 3, 0, 6, 3, 1, 7, 3, 2));

  // Shapes that are still the clients' one: tables left out at the end, a feature with
  // no ids, no candidates, the top level in another order, a scalar sent twice.
  v1::RankRequest fewer = FullRequest();
  fewer.mutable_user_features()->RemoveLast();
  fewer.mutable_candidates(1)->mutable_features()->RemoveLast();
  fewer.mutable_candidates(2)->mutable_features(1)->clear_ids();
  EXPECT_TRUE(CheckAgainstGeneral(decoder, first, fewer.SerializeAsString(), "fewer tables"));
  v1::RankRequest none = FullRequest();
  none.clear_candidates();
  EXPECT_TRUE(CheckAgainstGeneral(decoder, first, none.SerializeAsString(), "no candidates"));
  v1::RankRequest head = FullRequest();
  head.clear_candidates();
  v1::RankRequest tail;
  *tail.mutable_candidates() = FullRequest().candidates();
  tail.set_top_k(1);
  tail.set_request_id("r-2");
  EXPECT_TRUE(CheckAgainstGeneral(decoder, first,
                                  tail.SerializeAsString() + head.SerializeAsString(),
                                  "candidates first, top_k and request_id twice"));
}

TEST(RequestDecoderCanonicalTest, GivesUpOnAnyOtherShapeAndTheGeneralPathReadsIt) {
  const RequestDecoder decoder(Build(CanonicalTestModel()), kLimits);
  const std::string first = FullRequest().SerializeAsString();
  const std::string full = FullRequest().SerializeAsString();
  // Each a request the general path accepts, in a shape the one-pass decode does not read.
  std::vector<std::pair<std::string, std::string>> others;
  {
    v1::RankRequest r = FullRequest();
    r.mutable_candidates(0)->mutable_features()->SwapElements(0, 1);
    others.push_back({"tables out of the model's order", r.SerializeAsString()});
  }
  {
    v1::RankRequest r = FullRequest();
    r.clear_user_features();
    others.push_back(
        {"unpacked ids", wire::Len(2, wire::Len(1, "user_0") + wire::Tag(2, 0) + wire::Varint(9)) +
                             r.SerializeAsString()});
  }
  others.push_back({"an unknown field", full + wire::Tag(15, 0) + wire::Varint(1)});
  others.push_back(
      {"user_dense once more", full + wire::Len(3, std::string())});  // 0 values: no change
  others.push_back({"user_dense unpacked", [] {
                      v1::RankRequest r = FullRequest();
                      r.clear_user_dense();
                      std::string bytes = r.SerializeAsString();
                      for (float v : {1.0f, 2.0f}) bytes += wire::Tag(3, 5) + wire::Float(v);
                      return bytes;
                    }()});
  others.push_back({"a second name after the ids",
                    full + wire::Len(4, wire::Len(2, wire::Len(1, "item_0") + wire::Len(2, "\x01") +
                                                         wire::Len(1, "item_0")) +
                                            wire::Len(3, std::string(12, '\0')))});
  for (const auto& [label, bytes] : others) {
    EXPECT_FALSE(CheckAgainstGeneral(decoder, first, bytes, label)) << label;
    engine::Batch batch;
    EXPECT_TRUE(decoder.AppendWire(bytes, &batch).ok()) << label;  // and reads it
  }

  // Bad requests: the one-pass decode gives up, the general path says why.
  std::vector<std::pair<std::string, v1::RankRequest>> bad;
  auto add = [&](const std::string& label, auto edit) {
    v1::RankRequest r = FullRequest();
    edit(&r);
    bad.push_back({label, r});
  };
  add("an id past an oov: reject table",
      [](v1::RankRequest* r) { r->mutable_candidates(1)->mutable_features(1)->set_ids(0, 10); });
  add("too many ids", [](v1::RankRequest* r) {
    for (int i = 0; i < 3; ++i) r->mutable_candidates(0)->mutable_features(0)->add_ids(i);
  });
  add("a NaN weight", [](v1::RankRequest* r) {
    r->mutable_user_features(1)->set_weights(0, std::numeric_limits<float>::quiet_NaN());
  });
  add("two weights for one id",
      [](v1::RankRequest* r) { r->mutable_user_features(1)->add_weights(1.0f); });
  add("an Inf dense value", [](v1::RankRequest* r) {
    r->mutable_candidates(2)->set_dense(1, std::numeric_limits<float>::infinity());
  });
  add("dense of the wrong length",
      [](v1::RankRequest* r) { r->mutable_candidates(0)->add_dense(1); });
  add("no user_dense", [](v1::RankRequest* r) { r->clear_user_dense(); });
  add("too many candidates", [](v1::RankRequest* r) {
    while (r->candidates_size() <= kLimits.max_candidates) *r->add_candidates() = r->candidates(0);
  });
  add("too many ids in all", [](v1::RankRequest* r) {  // 2 + 8 x 3 of at most 24
    for (int c = 0; c < 5; ++c) *r->add_candidates() = r->candidates(c % 3);
  });
  add("a user table among a candidate's", [](v1::RankRequest* r) {
    r->mutable_candidates(0)->mutable_features(1)->set_name("user_1");
  });
  add("the same table twice", [](v1::RankRequest* r) {
    *r->mutable_candidates(0)->add_features() = r->candidates(0).features(0);
  });
  add("no such table", [](v1::RankRequest* r) { r->mutable_user_features(0)->set_name("user_9"); });
  std::vector<std::pair<std::string, std::string>> bad_bytes;
  for (const auto& [label, request] : bad)
    bad_bytes.push_back({label, request.SerializeAsString()});
  bad_bytes.push_back({"request_id not UTF-8", wire::Len(1, "\xff") + full});
  for (const auto& [label, bytes] : bad_bytes) {
    EXPECT_FALSE(CheckAgainstGeneral(decoder, first, bytes, label)) << label;
    engine::Batch batch;
    EXPECT_FALSE(decoder.AppendWire(bytes, &batch).ok()) << label;
  }
}

TEST(RequestDecoderCanonicalTest, NeverReadsAnotherModelsBatchOrAModelWithRedisTables) {
  const std::string wire = FullRequest().SerializeAsString();
  const RequestDecoder decoder(Build(CanonicalTestModel()), kLimits);
  const RequestDecoder other(Build(CanonicalTestModel()), kLimits);
  engine::Batch batch;
  std::vector<int64_t> item_ids;
  CanonicalRequest read;
  ASSERT_TRUE(other.AppendCanonical(wire, &batch, &item_ids, &read));
  const engine::Batch before = batch;
  EXPECT_FALSE(decoder.AppendCanonical(wire, &batch, &item_ids, &read));
  EXPECT_TRUE(SameBatch(batch, before));
  EXPECT_EQ(decoder.AppendWire(wire, &batch).code(), absl::StatusCode::kInternal);

  // A storage: redis table: its ids travel as raw keys, which only the general path keeps.
  fuserank::testing::TestModel remote = CanonicalTestModel();
  remote.spec.tables[2].storage = engine::Storage::kRedis;
  remote.spec.tables[2].rows = 0;
  remote.weights.erase("embeddings.item_0.weight");
  remote.shapes.erase("embeddings.item_0.weight");
  const RequestDecoder keyed(Build(remote), kLimits);
  engine::Batch keyed_batch;
  EXPECT_FALSE(keyed.AppendCanonical(wire, &keyed_batch, &item_ids, &read));
  ASSERT_TRUE(keyed.AppendWire(wire, &keyed_batch).ok());
  EXPECT_THAT(keyed_batch.item.keys, ElementsAre(105, 3, 0, 106, 3, 1, 107, 3, 2));
}

// Random requests built by protobuf with each side's tables in the model's order (a
// prefix of them), valid or breaking one rule: the one-pass decode takes exactly the valid
// ones. Then random bytes of every shape, mutated: it never accepts what the parse does
// not, nor reads it differently.
TEST(RequestDecoderCanonicalTest, AgreesWithTheGeneralPathOnRandomRequests) {
  const RequestDecoder decoder(Build(CanonicalTestModel()), kLimits);
  const std::string first = FullRequest().SerializeAsString();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  auto chance = [&](int percent) { return static_cast<int>(rng() % 100) < percent; };
  // Mostly rows of every table; now and then past the 10 or 50 rows of the oov: reject
  // tables, or negative.
  auto id = [&] {
    return chance(90) ? static_cast<int64_t>(rng() % 10)
                      : static_cast<int64_t>(rng() % 130) - (chance(50) ? 200 : 0);
  };
  auto value = [&] {
    return chance(2) ? std::numeric_limits<float>::quiet_NaN()
                     : static_cast<float>(static_cast<int>(rng() % 200) - 100) / 8.0f;
  };
  auto fill = [&](v1::Feature* f, const char* name) {
    f->set_name(name);
    const int n = static_cast<int>(rng() % 5);
    for (int i = 0; i < n; ++i) f->add_ids(id());
    if (chance(30)) {
      const int w = chance(90) ? n : n + 1;
      for (int i = 0; i < w; ++i) f->add_weights(value());
    }
  };
  int canonical = 0, valid = 0;
  constexpr int kRequests = 4000;
  for (int i = 0; i < kRequests; ++i) {
    v1::RankRequest r;
    if (chance(50)) r.set_request_id(absl::StrCat("q", i));
    if (chance(50)) r.set_top_k(static_cast<uint32_t>(rng() % 10));
    const int user = static_cast<int>(rng() % 3);
    for (int t = 0; t < user; ++t) fill(r.add_user_features(), t == 0 ? "user_0" : "user_1");
    const int du = chance(95) ? 2 : 1;
    for (int d = 0; d < du; ++d) r.add_user_dense(value());
    const int n = static_cast<int>(rng() % 6);
    for (int c = 0; c < n; ++c) {
      v1::Candidate* candidate = r.add_candidates();
      candidate->set_item_id(static_cast<int64_t>(rng() % 1000));
      const int tables = static_cast<int>(rng() % 3);
      for (int t = 0; t < tables; ++t)
        fill(candidate->add_features(), t == 0 ? "item_0" : "item_1");
      const int di = chance(97) ? 3 : 4;
      for (int d = 0; d < di; ++d) candidate->add_dense(value());
    }
    const std::string bytes = r.SerializeAsString();
    General general;
    DecodeGeneral(decoder, bytes, &general);
    const bool took = CheckAgainstGeneral(decoder, first, bytes, absl::StrCat("request ", i));
    ASSERT_EQ(took, general.status.ok()) << "request " << i << ": " << general.status;
    canonical += took;
    valid += general.status.ok();
  }
  EXPECT_GT(valid, kRequests / 5);
  EXPECT_LT(valid, kRequests * 4 / 5);

  int taken = 0;
  constexpr int kInputs = 20000;
  for (int i = 0; i < kInputs; ++i) {
    std::string bytes = wire::RandomRequest(&rng);
    wire::Mutate(&rng, &bytes);
    taken += CheckAgainstGeneral(decoder, first, bytes, absl::StrCat("input ", i));
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(taken, kInputs / 500) << "random bytes should take the one-pass decode now and then";
}

}  // namespace
}  // namespace fuserank::server
