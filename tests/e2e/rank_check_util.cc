#include "tests/e2e/rank_check_util.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/temp_dir.h"

namespace fuserank::testing {

std::string TempDir(const std::string& name) { return MakeTempDir(name); }

std::string E2eServerYaml(const std::string& admin_listen) {
  return absl::StrCat(R"(
server:
  listen: "127.0.0.1:0"
  admin_listen: ")",
                      admin_listen, R"("
  metrics_listen: "127.0.0.1:0"
  max_request_bytes: 65536
  max_candidates: 64
  max_ids_per_feature: 8
  shutdown_grace_seconds: 2
engine: {device: cpu, streams: 2, queue_capacity: 64}
models:
)");
}

Reply Rank(v1::Ranker::Stub* stub, const v1::RankRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  Reply reply;
  reply.status = stub->Rank(&context, request, &reply.response);
  return reply;
}

void ExpectMatchesReference(const TestModel& model, const v1::RankRequest& request,
                            const Reply& reply) {
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  const std::vector<double> reference = ReferenceScores(model, request);
  const int n = request.candidates_size();
  const int k = request.top_k() == 0 ? n : std::min<int>(request.top_k(), n);
  const auto& items = reply.response.items();
  EXPECT_EQ(reply.response.model_version(), model.spec.version);
  ASSERT_EQ(items.size(), k);
  std::vector<bool> returned(n, false);
  double lowest_returned = 2.0;
  for (int i = 0; i < k; ++i) {
    const v1::ScoredItem& item = items[i];
    ASSERT_LT(item.index(), static_cast<uint32_t>(n));
    EXPECT_FALSE(returned[item.index()]) << "index " << item.index() << " returned twice";
    returned[item.index()] = true;
    EXPECT_EQ(item.item_id(), request.candidates(item.index()).item_id());
    EXPECT_NEAR(item.score(), reference[item.index()], kTolerance) << "candidate " << item.index();
    EXPECT_GE(item.score(), 0.0f);
    EXPECT_LE(item.score(), 1.0f);
    if (i > 0) {
      const v1::ScoredItem& prev = items[i - 1];
      EXPECT_TRUE(prev.score() > item.score() ||
                  (prev.score() == item.score() && prev.index() < item.index()))
          << "position " << i << ": not score-descending with ties by lower index";
    }
    lowest_returned = std::min(lowest_returned, reference[item.index()]);
  }
  for (int c = 0; c < n; ++c) {
    if (!returned[c]) {
      EXPECT_LE(reference[c], lowest_returned + 2 * kTolerance)
          << "candidate " << c << " belongs in the top " << k;
    }
  }
}

}  // namespace fuserank::testing
