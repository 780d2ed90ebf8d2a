// What the e2e tests of storage: redis tables share: a local model's table written to a
// Redis Cluster in the layout a redis table is served from (docs/remote-tables.md).
#ifndef FUSERANK_TESTS_E2E_REMOTE_TABLE_UTIL_H_
#define FUSERANK_TESTS_E2E_REMOTE_TABLE_UTIL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fuserank/v1/ranker.pb.h"
#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::testing {

// Writes every row of table `table_index` of the model at `spec_path` to the cluster at
// `seeds`, as `fuserank:<table>:<row>` -> the row's bytes, within 20 s; a failure names
// the first row that was not stored (or why the model or the cluster could not be used).
::testing::AssertionResult WriteTableToCluster(const std::string& spec_path, int table_index,
                                               const std::vector<std::string>& seeds);

// Writes `model` into `dir` with table `table` as storage: redis (no rows, its weight left
// out of the file); returns the spec's path, as WriteTestModel.
absl::StatusOr<std::string> WriteWithRedisTable(TestModel model, int table, const std::string& dir);

// A request for the model of SmallSpec(1, 2, rows, ...) (user_0; item_0 and item_1 with
// one or two ids each; 2 user and 3 item dense values) with `candidates` candidates.
v1::RankRequest RandomSmallSpecRequest(std::mt19937_64& rng, int64_t rows, int candidates);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_REMOTE_TABLE_UTIL_H_
