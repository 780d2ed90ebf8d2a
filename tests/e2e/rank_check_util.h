// Shared checks of the end-to-end tests: one Rank call, and a response compared with the
// double-precision reference (order, ties, ids, scores within 5e-5, the top-K set).
// Test helpers; thread-safe.
#ifndef FUSERANK_TESTS_E2E_RANK_CHECK_UTIL_H_
#define FUSERANK_TESTS_E2E_RANK_CHECK_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "fuserank/v1/ranker.grpc.pb.h"
#include "tests/testing/test_model.h"

namespace fuserank::testing {

inline constexpr double kTolerance = 5e-5;

struct Reply {
  grpc::Status status;
  v1::RankResponse response;
};

// Rank with a 30 s deadline.
Reply Rank(v1::Ranker::Stub* stub, const v1::RankRequest& request);

// Adds a gtest failure for every way `reply` differs from the reference for `request`.
void ExpectMatchesReference(const TestModel& model, const v1::RankRequest& request,
                            const Reply& reply);

// A fresh directory under the test temp dir, unique to this process.
std::string TempDir(const std::string& name);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_RANK_CHECK_UTIL_H_
