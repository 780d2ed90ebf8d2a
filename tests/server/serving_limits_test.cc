#include "server/serving_limits.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

Config Parsed(const std::string& yaml) {
  absl::StatusOr<Config> config = ParseConfig(yaml, "limits.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : Config{};
}

TEST(ServingLimitsTest, AutoStreamsFollowTheCoresOnTheCpuAndStayFourOnCuda) {
  const Config cpu = Parsed("engine: {device: cpu}");
  EXPECT_EQ(ResolveServingLimits(cpu, 1).streams, 1);
  EXPECT_EQ(ResolveServingLimits(cpu, 2).streams, 2);
  EXPECT_EQ(ResolveServingLimits(cpu, 64).streams, 4);
  EXPECT_EQ(ResolveServingLimits(Parsed("engine: {device: cpu, cpu_threads: 2}"), 8).streams, 4);
  EXPECT_EQ(ResolveServingLimits(Parsed("engine: {device: cpu, cpu_threads: 4}"), 2).streams, 1);
  EXPECT_EQ(ResolveServingLimits(Parsed("engine: {device: cuda}"), 1).streams, 4);
  EXPECT_EQ(ResolveServingLimits(Parsed("engine: {device: cpu, streams: 7}"), 1).streams, 7);
}

TEST(ServingLimitsTest, TheInflightBoundIsDerivedFromTheQueueTheWorkersAndTheBatch) {
  // Per model: 2 x queue_capacity + streams * (max_batch_candidates / max_candidates);
  // plus four calls per core being read.
  const Config config = Parsed(
      "server: {max_candidates: 256}\n"
      "engine: {device: cpu, queue_capacity: 64, max_batch_candidates: 1024}");
  const ServingLimits limits = ResolveServingLimits(config, 1);
  EXPECT_EQ(limits.max_inflight_requests, 2 * 64 + 1 * 4 + 4);
  EXPECT_EQ(limits.max_concurrent_streams, 2 * limits.max_inflight_requests);
  EXPECT_EQ(limits.transport_memory_bytes, int64_t{32} * 16777216);
  const Config two = Parsed(
      "engine: {device: cpu, queue_capacity: 10}\n"
      "models: [{name: a, path: a.yaml}, {name: b, path: b.yaml}]");
  EXPECT_EQ(ResolveServingLimits(two, 2).max_inflight_requests, 2 * (2 * 10 + 2 * 2) + 8);
}

TEST(ServingLimitsTest, SetKeysAreTakenAsTheyAre) {
  const Config config = Parsed(
      "server: {max_inflight_requests: 9, max_concurrent_streams: 5, "
      "transport_memory_bytes: 2097152}");
  const ServingLimits limits = ResolveServingLimits(config, 4);
  EXPECT_EQ(limits.max_inflight_requests, 9);
  EXPECT_EQ(limits.max_concurrent_streams, 5);
  EXPECT_EQ(limits.transport_memory_bytes, 2097152);
  const std::string described = DescribeServingLimits(config, limits);
  EXPECT_THAT(described, HasSubstr("server.max_inflight_requests 9,"));
  EXPECT_THAT(described, HasSubstr("engine.streams 4 (derived)"));
}

TEST(ServingLimitsTest, AvailableCoresIsAtLeastOne) { EXPECT_GE(AvailableCores(), 1); }

}  // namespace
}  // namespace fuserank::server
