// What the tests against a real Redis Cluster (cluster_client_test.cc and the remote tier's
// tests) share: a 3-master cluster started for a test, or the test skipped where redis is not
// installed; and SETs written through a ClusterClient with every reply checked. Test
// helpers; one thread at a time.
#ifndef FUSERANK_TESTS_ENGINE_REMOTE_CLUSTER_TEST_UTIL_H_
#define FUSERANK_TESTS_ENGINE_REMOTE_CLUSTER_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/batch.h"
#include "engine/model.h"
#include "engine/remote/cluster_client.h"
#include "gtest/gtest.h"
#include "tests/testing/redis_cluster.h"

namespace fuserank::testing {

// For a fixture's SetUp: starts 3 masters into *cluster, GTEST_SKIPs without redis and
// fails fatally when the cluster does not start. The caller then returns on
// IsSkipped() || HasFatalFailure().
void StartThreeMasters(std::unique_ptr<RedisCluster>* cluster);

// Runs `commands` (SETs) through `client` within `timeout`; a failure naming the first
// key that was not stored.
::testing::AssertionResult SetAll(remote::ClusterClient& client,
                                  const std::vector<remote::Command>& commands,
                                  std::chrono::seconds timeout);

// SetAll through a new client seeded with `seeds`; a failure too when it cannot connect.
::testing::AssertionResult SetAllThroughNewClient(const std::vector<std::string>& seeds,
                                                  const std::vector<remote::Command>& commands,
                                                  std::chrono::seconds timeout);

// Writes every row of `table` (its row_bytes each) under the key `key(row)` through a new
// client seeded with `seeds`, within 10 s (as SetAllThroughNewClient).
::testing::AssertionResult WriteTableRows(const engine::EmbeddingTable& table,
                                          const std::function<std::string(int64_t)>& key,
                                          const std::vector<std::string>& seeds);

// `local` (a batch of the model with the table local) for `remote` (the same model with
// storage: redis tables): the bags' rows become their keys, as raw ids address a redis
// table.
engine::Batch WithRowsAsKeys(const engine::Batch& local,
                             std::shared_ptr<const engine::Model> remote);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_ENGINE_REMOTE_CLUSTER_TEST_UTIL_H_
