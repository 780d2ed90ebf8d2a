#include "bench/loadgen/request_pool.h"

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "engine/model_spec.h"
#include "fuserank/v1/ranker.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::bench {
namespace {

engine::ModelSpec TwoUserThreeItemSpec() {
  engine::ModelSpec spec;
  spec.name = "t";
  spec.version = "1";
  auto table = [](std::string name, engine::Side side, int64_t rows) {
    engine::TableSpec t;
    t.name = std::move(name);
    t.side = side;
    t.rows = rows;
    t.dim = 4;
    return t;
  };
  // Sides interleaved on purpose: requests must put each table on its own side.
  spec.tables = {table("u_a", engine::Side::kUser, 100), table("i_a", engine::Side::kItem, 5000),
                 table("u_b", engine::Side::kUser, 3), table("i_b", engine::Side::kItem, 10),
                 table("i_c", engine::Side::kItem, 1)};
  spec.dense_user = 2;
  spec.dense_item = 3;
  spec.top_mlp = {1};
  return spec;
}

TEST(RequestPoolTest, RequestsFollowTheSpec) {
  const engine::ModelSpec spec = TwoUserThreeItemSpec();
  RequestOptions options;
  options.candidates = 7;
  options.top_k = 3;
  options.bag = 2;
  options.weights = true;
  options.model_name = "m";
  RequestGenerator generator(spec, options);
  fuserank::v1::RankRequest request;
  std::set<std::string> ids;
  for (int r = 0; r < 20; ++r) {
    generator.Next(&request);
    EXPECT_TRUE(ids.insert(request.request_id()).second);
    EXPECT_EQ(request.top_k(), 3u);
    EXPECT_EQ(request.model(), "m");
    ASSERT_EQ(request.user_features_size(), 2);
    EXPECT_EQ(request.user_features(0).name(), "u_a");
    EXPECT_EQ(request.user_features(1).name(), "u_b");
    EXPECT_EQ(request.user_dense_size(), 2);
    ASSERT_EQ(request.candidates_size(), 7);
    for (const auto& candidate : request.candidates()) {
      ASSERT_EQ(candidate.features_size(), 3);
      EXPECT_EQ(candidate.features(0).name(), "i_a");
      EXPECT_EQ(candidate.features(2).name(), "i_c");
      EXPECT_EQ(candidate.dense_size(), 3);
      EXPECT_EQ(candidate.item_id(), candidate.features(0).ids(0));
    }
    std::map<std::string, int64_t> rows = {
        {"u_a", 100}, {"u_b", 3}, {"i_a", 5000}, {"i_b", 10}, {"i_c", 1}};
    auto check = [&](const fuserank::v1::Feature& f) {
      ASSERT_EQ(f.ids_size(), 2) << f.name();
      ASSERT_EQ(f.weights_size(), 2) << f.name();
      for (int64_t id : f.ids()) {
        EXPECT_GE(id, 0) << f.name();
        EXPECT_LT(id, rows[f.name()]) << f.name();
      }
      for (float w : f.weights()) {
        EXPECT_GE(w, 0.5f);
        EXPECT_LT(w, 1.5f);
      }
    };
    for (const auto& f : request.user_features()) check(f);
    for (const auto& c : request.candidates()) {
      for (const auto& f : c.features()) check(f);
    }
  }
}

TEST(RequestPoolTest, IdsAreSkewedLikeZipf) {
  const engine::ModelSpec spec = TwoUserThreeItemSpec();
  RequestOptions options;
  options.candidates = 100;
  RequestGenerator generator(spec, options);
  fuserank::v1::RankRequest request;
  std::map<int64_t, int> counts;
  int total = 0;
  for (int r = 0; r < 50; ++r) {
    generator.Next(&request);
    for (const auto& c : request.candidates()) {
      ++counts[c.features(0).ids(0)];  // table i_a, 5000 rows
      ++total;
    }
  }
  int top = 0;
  for (const auto& [id, n] : counts) top = std::max(top, n);
  // Zipf 1.05 over 5000 rows puts ~11% of draws on the hottest row; uniform: 0.02%.
  EXPECT_GT(top, total / 20);
  EXPECT_LT(top, total / 5);
}

TEST(RequestPoolTest, PoolIsDeterministicAndCountsItems) {
  const engine::ModelSpec spec = TwoUserThreeItemSpec();
  RequestOptions options;
  options.candidates = 5;
  options.top_k = 10;
  absl::StatusOr<RequestPool> a = BuildRequestPool(spec, options, 4);
  absl::StatusOr<RequestPool> b = BuildRequestPool(spec, options, 4);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->serialized, b->serialized);
  EXPECT_EQ(a->expected_items, 5);
  EXPECT_GT(a->mean_bytes, 0);
  EXPECT_NE(a->serialized[0], a->serialized[1]);
  options.seed = 2;
  EXPECT_NE(BuildRequestPool(spec, options, 4)->serialized, a->serialized);
  options.top_k = 2;
  EXPECT_EQ(BuildRequestPool(spec, options, 1)->expected_items, 2);
  options.top_k = 0;
  EXPECT_EQ(BuildRequestPool(spec, options, 1)->expected_items, 5);
}

TEST(RequestPoolTest, RejectsBadOptions) {
  const engine::ModelSpec spec = TwoUserThreeItemSpec();
  RequestOptions options;
  EXPECT_FALSE(BuildRequestPool(spec, options, 0).ok());
  options.bag = 0;
  EXPECT_FALSE(BuildRequestPool(spec, options, 1).ok());
  options.bag = 1;
  options.zipf_alpha = -1;
  EXPECT_FALSE(BuildRequestPool(spec, options, 1).ok());
}

// Each refusal names its flag and bound; before, --zipf=nan or inf hung the sampler and a
// huge --candidates or --bag ended in std::bad_alloc.
TEST(RequestPoolTest, RefusesWhatNoServerTakesOrNoMachineHolds) {
  const engine::ModelSpec spec = TwoUserThreeItemSpec();
  auto error = [&](const RequestOptions& options, int size) {
    return std::string(ValidateRequestOptions(spec, options, size).message());
  };
  for (double alpha : {std::nan(""), HUGE_VAL, -HUGE_VAL, -0.5}) {
    RequestOptions options;
    options.zipf_alpha = alpha;
    EXPECT_THAT(error(options, 1), ::testing::HasSubstr("--zipf: want a finite number >= 0"))
        << alpha;
    EXPECT_EQ(BuildRequestPool(spec, options, 1).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  RequestOptions options;
  options.candidates = kMaxCandidates + 1;
  EXPECT_THAT(error(options, 1), ::testing::HasSubstr("--candidates: want 0..1048576 (the largest "
                                                      "server.max_candidates), got 1048577"));
  options.candidates = -1;
  EXPECT_THAT(error(options, 1), ::testing::HasSubstr("--candidates: want 0..1048576"));
  options.candidates = 16;
  options.bag = kMaxBag + 1;
  EXPECT_THAT(error(options, 1), ::testing::HasSubstr("--bag: want 1..1048576 (the largest "
                                                      "server.max_ids_per_feature), got 1048577"));
  // Each flag within its bound, their product not: refused before anything is built.
  options.candidates = kMaxCandidates;
  options.bag = kMaxBag;
  EXPECT_THAT(error(options, 1), ::testing::HasSubstr("--requests_pool=1 requests of "
                                                      "--candidates=1048576, --bag=1048576 would "
                                                      "take about"));
  EXPECT_EQ(BuildRequestPool(spec, options, 1).status().code(), absl::StatusCode::kInvalidArgument);
  options.bag = 1;
  EXPECT_THAT(error(options, 512), ::testing::HasSubstr("--requests_pool=512"));
  EXPECT_EQ(error(options, 16), "");
  EXPECT_THAT(error(RequestOptions(), 0), ::testing::HasSubstr("--requests_pool: want at least 1"));
  // What the benchmarks ask for passes.
  options.candidates = 4096;
  options.bag = 8;
  options.weights = true;
  EXPECT_EQ(error(options, 512), "");
}

}  // namespace
}  // namespace fuserank::bench
