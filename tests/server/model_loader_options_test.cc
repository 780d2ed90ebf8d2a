// LoaderOptionsFrom: every engine.*, cache.*, server.* and remote.* key the loader takes
// reaches its option, each set to a value other than its default (so a key wired to the
// wrong field, or to none, fails here rather than passing as the default).
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/model_loader.h"

namespace fuserank::server {
namespace {

constexpr char kConfig[] = R"(
server: {max_candidates: 3000, max_ids_per_feature: 77}
engine:
  device: cuda
  gpu: 3
  streams: 5
  max_batch_candidates: 2500
  max_batch_wait_us: 321
  queue_capacity: 99
  max_queue_delay_ms: 45
  max_batch_ids: 123456
  max_queued_ids: 654321
  cuda_graphs: false
  cpu_threads: 6
  worker_nice: 7
  allow_tf32: true
  cuda_wait: spin
  on_device_failure: cpu
cache: {hot_rows_per_table: 17, policy: frequency, rebuild_interval_seconds: 13, placement: host}
remote:
  seed_nodes: ["10.0.0.1:7000", "10.0.0.2:7001"]
  fetch_deadline_ms: 31
  pool_size: 9
  on_remote_error: zero
  near_cache_rows: 1000
  near_cache_ttl_ms: 2500
  key_prefix: "rank:"
model: {path: /models/demo.yaml, memory_budget_bytes: 2097152}
)";

TEST(LoaderOptionsFromTest, EveryKeyReachesItsOption) {
  absl::StatusOr<Config> config = ParseConfig(kConfig, "options.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelLoaderOptions o = LoaderOptionsFrom(*config);
  EXPECT_EQ(o.device, engine::DeviceChoice::kCuda);
  EXPECT_EQ(o.on_device_failure, OnDeviceFailure::kCpu);
  EXPECT_EQ(o.backend.gpu, 3);
  EXPECT_EQ(o.backend.workers, 5);
  EXPECT_EQ(o.backend.cpu_threads, 6);
  EXPECT_EQ(o.backend.worker_nice, 7);
  EXPECT_FALSE(o.backend.cuda_graphs);
  EXPECT_TRUE(o.backend.allow_tf32);
  EXPECT_FALSE(o.backend.cuda_blocking_wait);
  EXPECT_TRUE(o.backend.host_tables);
  // The backend holds the larger of a merged batch and one request.
  EXPECT_EQ(o.backend.max_batch_candidates, 3000);
  EXPECT_EQ(o.limits.max_candidates, 3000);
  EXPECT_EQ(o.limits.max_ids_per_feature, 77);
  EXPECT_EQ(o.limits.max_ids, 123456);
  EXPECT_EQ(o.batcher.queue_capacity, 99);
  EXPECT_EQ(o.batcher.max_batch_candidates, 2500);
  EXPECT_EQ(o.batcher.max_batch_wait_us, 321);
  EXPECT_EQ(o.batcher.max_batch_ids, 123456);
  EXPECT_EQ(o.batcher.max_queued_ids, 654321);
  EXPECT_EQ(o.batcher.max_queue_delay_ms, 45);
  EXPECT_EQ(o.batcher.worker_nice, 7);
  EXPECT_EQ(o.cache.capacity, 17);
  EXPECT_TRUE(o.cache.frequency);
  EXPECT_EQ(o.cache.rebuild_interval, absl::Seconds(13));
  ASSERT_NE(o.budget, nullptr);
  EXPECT_EQ(o.budget->limit(), 2097152u);
  ASSERT_NE(o.roots, nullptr);
  EXPECT_EQ(o.remote.seed_nodes, (std::vector<std::string>{"10.0.0.1:7000", "10.0.0.2:7001"}));
  EXPECT_EQ(o.remote.fetch_deadline_ms, 31);
  EXPECT_EQ(o.remote.pool_size, 9);
  EXPECT_EQ(o.remote.on_remote_error, engine::OnRemoteError::kZero);
  EXPECT_EQ(o.remote.near_cache_rows, 1000);
  EXPECT_EQ(o.remote.near_cache_ttl_ms, 2500);
  EXPECT_EQ(o.remote.key_prefix, "rank:");
}

// The other side of the choices: max_batch_candidates above server.max_candidates is the
// backend's size; cuda_wait block is a blocking wait; placement device keeps the tables on
// the device; cpu_precision (the CPU engine's only) bf16.
TEST(LoaderOptionsFromTest, TheOtherValuesOfTheChoices) {
  absl::StatusOr<Config> config = ParseConfig(
      "server: {max_candidates: 100}\nengine: {max_batch_candidates: 5000, cuda_wait: block, "
      "device: cpu, cpu_precision: bf16}\ncache: {placement: device}\nmodel: {path: "
      "/models/demo.yaml}\n",
      "options.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelLoaderOptions o = LoaderOptionsFrom(*config);
  EXPECT_EQ(o.device, engine::DeviceChoice::kCpu);
  EXPECT_EQ(o.backend.cpu_precision, engine::CpuPrecision::kBf16);  // CPU engine only
  EXPECT_EQ(o.backend.max_batch_candidates, 5000);
  EXPECT_TRUE(o.backend.cuda_blocking_wait);
  EXPECT_FALSE(o.backend.host_tables);
  EXPECT_FALSE(o.cache.frequency);
}

}  // namespace
}  // namespace fuserank::server
