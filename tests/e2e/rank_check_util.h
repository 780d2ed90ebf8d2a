// Shared checks of the end-to-end tests: one Rank call, and a response compared with the
// double-precision reference (order, ties, ids, scores within 5e-5, the top-K set); and the
// server config the suites that share one server start it on.
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

// A new empty directory under the test temp dir, removed at exit unless its test failed
// (tests/testing/temp_dir.h: MakeTempDir). Each call makes another one.
std::string TempDir(const std::string& name);

// A config's server and engine sections, up to a "models:" line for the caller to fill:
// Ranker and metrics on free ports of 127.0.0.1, admin on `admin_listen` ("": off), the
// limits max_request_bytes 65536, max_candidates 64, max_ids_per_feature 8; the CPU engine
// with 2 streams and queue_capacity 64.
std::string E2eServerYaml(const std::string& admin_listen);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_RANK_CHECK_UTIL_H_
