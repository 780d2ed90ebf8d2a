// The server config: every default, every key read, a model list, the shipped config, the
// effective config read back to the same config, bf16 where the CPU runs it, a missing file
// named, a public admin address with its token file. Refused configs: config_errors_test.cc.
#include "server/config.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "engine/cpu/sgemm_bf16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config_validation.h"
#include "tests/testing/temp_dir.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

constexpr char kFile[] = "config/x.yaml";

TEST(ConfigTest, EmptyFileGivesEveryDefault) {
  absl::StatusOr<Config> config = ParseConfig("", kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.listen, "0.0.0.0:8700");
  EXPECT_EQ(config->server.admin_listen, "127.0.0.1:8701");
  EXPECT_EQ(config->server.admin_token_file, "");
  EXPECT_TRUE(config->server.admin_allow_plaintext_token);
  EXPECT_EQ(config->server.metrics_listen, "0.0.0.0:8702");
  EXPECT_FALSE(config->server.tls.enabled());
  EXPECT_EQ(config->server.max_request_bytes, 16777216);
  EXPECT_EQ(config->server.max_candidates, 4096);
  EXPECT_EQ(config->server.max_ids_per_feature, 1024);
  EXPECT_EQ(config->server.shutdown_grace_seconds, 10);
  EXPECT_EQ(config->server.max_inflight_requests, 0);
  EXPECT_EQ(config->server.max_concurrent_streams, 0);
  EXPECT_EQ(config->server.transport_memory_bytes, 0);
  EXPECT_EQ(config->engine.device, engine::DeviceChoice::kAuto);
  EXPECT_EQ(config->engine.gpu, 0);
  EXPECT_TRUE(config->engine.streams_auto);
  EXPECT_EQ(config->engine.max_queue_delay_ms, 0);
  EXPECT_EQ(config->engine.max_batch_ids, 4194304);
  EXPECT_EQ(config->engine.max_queued_ids, 16777216);
  EXPECT_EQ(config->engine.max_batch_candidates, 8192);
  EXPECT_EQ(config->engine.max_batch_wait_us, 200);
  EXPECT_EQ(config->engine.queue_capacity, 1024);
  EXPECT_TRUE(config->engine.cuda_graphs);
  EXPECT_EQ(config->engine.cpu_threads, 1);
  EXPECT_FALSE(config->engine.allow_tf32);
  EXPECT_EQ(config->engine.cpu_precision, engine::CpuPrecision::kFp32);
  EXPECT_EQ(config->engine.cuda_wait, CudaWait::kBlock);
  EXPECT_EQ(config->cache.hot_rows_per_table, 4096);
  EXPECT_EQ(config->cache.policy, CachePolicy::kStatic);
  EXPECT_EQ(config->cache.rebuild_interval_seconds, 60);
  EXPECT_EQ(config->cache.placement, CachePlacement::kDevice);
  EXPECT_EQ(config->cache.shared_memory_rows, 0);
  ASSERT_EQ(config->models.size(), 1u);
  EXPECT_EQ(config->models[0].name, "");
  EXPECT_EQ(config->models[0].path, "config/models/demo.yaml");
  EXPECT_TRUE(config->model_roots.empty());
  EXPECT_EQ(config->model_memory_budget_bytes, 0);
  EXPECT_EQ(config->logging.level, "info");
  EXPECT_EQ(config->logging.format, LogFormat::kText);
  EXPECT_EQ(config->logging.access_log_sample, 0.0);
  EXPECT_EQ(config->file, kFile);
}

TEST(ConfigTest, ReadsEveryKey) {
  const char* yaml = R"(
server:
  listen: 127.0.0.1:9000
  admin_listen: 127.0.0.2:9001
  admin_token_file: ""
  metrics_listen: "[::]:9002"
  tls: {cert_file: "", key_file: "", client_ca_file: ""}
  max_request_bytes: 4096
  max_candidates: 100
  max_ids_per_feature: 7
  shutdown_grace_seconds: 3
  max_inflight_requests: 40
  max_concurrent_streams: 80
  transport_memory_bytes: 33554432
engine:
  device: auto
  gpu: 2
  streams: 8
  max_batch_candidates: 500
  max_batch_wait_us: 0
  queue_capacity: 16
  max_queue_delay_ms: 20
  max_batch_ids: 1000
  max_queued_ids: 5000
  cuda_graphs: false
  cpu_threads: 3
  allow_tf32: true
  cpu_precision: fp32
  cuda_wait: spin
cache:
  hot_rows_per_table: 10
  policy: frequency
  rebuild_interval_seconds: 5
  placement: device
  shared_memory_rows: 0
model:
  path: /models/m.yaml
logging: {level: debug, format: json, access_log_sample: 0.25}
)";
  absl::StatusOr<Config> config = ParseConfig(yaml, kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.listen, "127.0.0.1:9000");
  EXPECT_EQ(config->server.admin_listen, "127.0.0.2:9001");
  EXPECT_EQ(config->server.metrics_listen, "[::]:9002");
  EXPECT_EQ(config->server.max_request_bytes, 4096);
  EXPECT_EQ(config->server.max_candidates, 100);
  EXPECT_EQ(config->server.max_ids_per_feature, 7);
  EXPECT_EQ(config->server.shutdown_grace_seconds, 3);
  EXPECT_EQ(config->server.max_inflight_requests, 40);
  EXPECT_EQ(config->server.max_concurrent_streams, 80);
  EXPECT_EQ(config->server.transport_memory_bytes, 33554432);
  EXPECT_EQ(config->engine.device, engine::DeviceChoice::kAuto);
  EXPECT_EQ(config->engine.gpu, 2);
  EXPECT_EQ(config->engine.streams, 8);
  EXPECT_FALSE(config->engine.streams_auto);
  EXPECT_EQ(config->engine.max_queue_delay_ms, 20);
  EXPECT_EQ(config->engine.max_batch_ids, 1000);
  EXPECT_EQ(config->engine.max_queued_ids, 5000);
  EXPECT_EQ(config->engine.max_batch_candidates, 500);
  EXPECT_EQ(config->engine.max_batch_wait_us, 0);
  EXPECT_EQ(config->engine.queue_capacity, 16);
  EXPECT_FALSE(config->engine.cuda_graphs);
  EXPECT_EQ(config->engine.cpu_threads, 3);
  EXPECT_TRUE(config->engine.allow_tf32);
  EXPECT_EQ(config->engine.cuda_wait, CudaWait::kSpin);
  EXPECT_EQ(config->cache.hot_rows_per_table, 10);
  EXPECT_EQ(config->cache.policy, CachePolicy::kFrequency);
  EXPECT_EQ(config->cache.rebuild_interval_seconds, 5);
  EXPECT_EQ(config->cache.placement, CachePlacement::kDevice);
  EXPECT_EQ(config->cache.shared_memory_rows, 0);
  ASSERT_EQ(config->models.size(), 1u);
  EXPECT_EQ(config->models[0].path, "/models/m.yaml");
  EXPECT_EQ(config->logging.level, "debug");
  EXPECT_EQ(config->logging.format, LogFormat::kJson);
  EXPECT_DOUBLE_EQ(config->logging.access_log_sample, 0.25);
}

TEST(ConfigTest, ReadsAModelList) {
  absl::StatusOr<Config> config =
      ParseConfig("models:\n  - {name: a, path: a.yaml}\n  - {path: b.yaml}\n", kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->models.size(), 2u);
  EXPECT_EQ(config->models[0].name, "a");
  EXPECT_EQ(config->models[0].path, "a.yaml");
  EXPECT_EQ(config->models[1].name, "");
  EXPECT_EQ(config->models[1].path, "b.yaml");
}

TEST(ConfigTest, NullSectionsKeepTheirDefaults) {
  absl::StatusOr<Config> config = ParseConfig("server:\nengine:\n", kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->engine.streams_auto);
}

TEST(ConfigTest, TheShippedConfigIsValidAndUsesTheDemoModel) {
  absl::StatusOr<Config> config = LoadConfigFile(FUSERANK_SOURCE_DIR "/config/fuserank.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.listen, "0.0.0.0:8700");
  ASSERT_EQ(config->models.size(), 1u);
  EXPECT_EQ(config->models[0].path, "config/models/demo.yaml");
}

TEST(ConfigTest, EffectiveConfigReadsBackToTheSameConfig) {
  const char* yaml = R"(
server: {listen: "127.0.0.1:0", admin_listen: "", metrics_listen: "127.0.0.1:0"}
engine: {device: cuda, streams: 2, cuda_graphs: false}
cache: {policy: frequency, placement: host}
models: [{name: x, path: "/tmp/a b.yaml"}, {name: y, path: y.yaml}]
logging: {level: warn, format: json, access_log_sample: 0.1}
)";
  absl::StatusOr<Config> config = ParseConfig(yaml, kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  const std::string effective = EffectiveConfigYaml(*config);
  absl::StatusOr<Config> again = ParseConfig(effective, "effective");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << effective;
  EXPECT_EQ(EffectiveConfigYaml(*again), effective);
  EXPECT_EQ(again->engine.device, engine::DeviceChoice::kCuda);
  EXPECT_EQ(again->cache.placement, CachePlacement::kHost);
  EXPECT_EQ(again->models[0].path, "/tmp/a b.yaml");
  EXPECT_EQ(again->logging.access_log_sample, 0.1);
  EXPECT_EQ(again->server.admin_listen, "");

  absl::StatusOr<Config> defaults = ParseConfig("", kFile);
  ASSERT_TRUE(defaults.ok());
  const std::string default_yaml = EffectiveConfigYaml(*defaults);
  EXPECT_THAT(default_yaml, HasSubstr("streams: auto"));
  EXPECT_THAT(default_yaml, HasSubstr("max_inflight_requests: 0"));
  EXPECT_THAT(default_yaml, HasSubstr("max_queue_delay_ms: 0"));
  EXPECT_THAT(default_yaml, HasSubstr("path: config/models/demo.yaml"));
  absl::StatusOr<Config> defaults_again = ParseConfig(default_yaml, "effective");
  ASSERT_TRUE(defaults_again.ok()) << defaults_again.status();
  EXPECT_EQ(EffectiveConfigYaml(*defaults_again), default_yaml);
}

// Control characters in strings (found by the config fuzzer: a carriage return written
// into a plain scalar read back as a line break) are written so that they read back.
TEST(ConfigTest, EffectiveConfigKeepsControlCharactersInStrings) {
  const char* yaml =
      "server: {listen: \"127.0.0.1:0\\r\", admin_listen: \"\"}\n"
      "models: [{name: \"a\\x7f\", path: \"dir/\\tb.yaml\"}, {name: b, path: b.yaml}]\n";
  absl::StatusOr<Config> config = ParseConfig(yaml, kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->server.listen, "127.0.0.1:0\r");
  const std::string effective = EffectiveConfigYaml(*config);
  absl::StatusOr<Config> again = ParseConfig(effective, "effective");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << effective;
  EXPECT_EQ(again->server.listen, "127.0.0.1:0\r");
  EXPECT_EQ(again->models[0].name, "a\x7f");
  EXPECT_EQ(again->models[0].path, "dir/\tb.yaml");
  EXPECT_EQ(EffectiveConfigYaml(*again), effective);
}

// bf16 starts where the CPU runs it and is refused at start, naming the key, elsewhere.
TEST(ConfigTest, Bf16IsAcceptedWhereTheCpuRunsIt) {
  absl::StatusOr<Config> config = ParseConfig("engine: {cpu_precision: bf16}", kFile);
  if (engine::Bf16KernelsAvailable().ok()) {
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->engine.cpu_precision, engine::CpuPrecision::kBf16);
  } else {
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(config.status().message(), HasSubstr("config/x.yaml: engine.cpu_precision: bf16"));
    EXPECT_THAT(config.status().message(), HasSubstr("use fp32"));
  }
}

TEST(ConfigTest, AMissingFileIsNamed) {
  absl::StatusOr<Config> config = LoadConfigFile("/nonexistent/fuserank.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("/nonexistent/fuserank.yaml"));
}

TEST(ConfigTest, ADirectoryIsNotAConfig) {
  // It would read as an empty file, so as all defaults, and the server would start on them.
  const std::string dir = fuserank::testing::MakeTempDir("config_test_dir");
  absl::StatusOr<Config> config = LoadConfigFile(dir);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(config.status().message(),
              HasSubstr("config '" + dir + "' is a directory, not a regular file"));
}

TEST(ConfigTest, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = fuserank::testing::MakeTempDir("config_test_fifo") + "/config.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<Config> config = LoadConfigFile(fifo);  // would block on an open for reading
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("is a FIFO, not a regular file"));
}

TEST(ConfigTest, AFileOverTheBoundIsRefusedUnread) {
  const std::string path = fuserank::testing::MakeTempDir("config_test_large") + "/config.yaml";
  std::ofstream(path) << std::string(kMaxConfigBytes + 1, '#');
  absl::StatusOr<Config> config = LoadConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("more than the limit of 1048576"));
}

TEST(ConfigTest, DecimalIntegersAndYaml12BooleansRead) {
  absl::StatusOr<Config> config = ParseConfig(
      "server: {max_candidates: 0, shutdown_grace_seconds: 10}\n"
      "engine: {max_batch_wait_us: -0, cuda_graphs: False, allow_tf32: TRUE}\n",
      kFile);
  // max_candidates 0 is out of its range: the integer itself was read.
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("server.max_candidates: must be in 1.."));
  config = ParseConfig(
      "server: {shutdown_grace_seconds: 10}\n"
      "engine: {max_batch_wait_us: -0, cuda_graphs: False, allow_tf32: TRUE}\n",
      kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.shutdown_grace_seconds, 10);
  EXPECT_EQ(config->engine.max_batch_wait_us, 0);
  EXPECT_FALSE(config->engine.cuda_graphs);
  EXPECT_TRUE(config->engine.allow_tf32);
}

TEST(ConfigTest, SeedNodesTakeNamesAndBracketedIpv6) {
  absl::StatusOr<Config> config = ParseConfig(
      "remote: {seed_nodes: [\"redis-0.redis:6379\", \"[::1]:7000\", \"10.0.0.5:7001\"]}\n", kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->remote.seed_nodes.size(), 3u);
}

TEST(ConfigTest, KeysWithoutEffectAreWarnedOfNotRefused) {
  // SPEC section 5's example sets gpu and cuda_graphs: switched to the CPU it still starts.
  const std::string token = fuserank::testing::MakeTempDir("config_test_unused_token") + "/token";
  std::ofstream(token) << "secret\n";
  absl::StatusOr<Config> config =
      ParseConfig("server: {admin_listen: \"\", admin_token_file: " + token +
                      "}\n"
                      "engine: {device: cpu, gpu: 0, cuda_graphs: true, cuda_wait: spin}\n",
                  kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(
      ConfigWarnings(*config),
      ::testing::ElementsAre(
          "config/x.yaml: engine.gpu: has no effect with engine.device: cpu (only the CUDA "
          "backend reads it)",
          "config/x.yaml: engine.cuda_graphs: has no effect with engine.device: cpu (only the "
          "CUDA backend reads it)",
          "config/x.yaml: engine.cuda_wait: has no effect with engine.device: cpu (only the "
          "CUDA backend reads it)",
          "config/x.yaml: server.admin_token_file: has no effect: server.admin_listen is empty, "
          "so the Admin service is off and no call is checked against the token"));
  // A default is not a key given; under auto the device is chosen at start.
  config = ParseConfig("engine: {device: cpu}\n", kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(ConfigWarnings(*config), ::testing::IsEmpty());
  config = ParseConfig("engine: {device: auto, gpu: 1, on_device_failure: cpu}\n", kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(ConfigWarnings(*config), ::testing::IsEmpty());
}

TEST(ConfigTest, ATokenOnAPublicAdminAddressWithoutTlsIsAcceptedWithAWarning) {
  const std::string token = fuserank::testing::MakeTempDir("config_test_token") + "/token";
  std::ofstream(token) << "secret\n";
  // SPEC section 5: a non-loopback address needs a token, nothing more by default; the start
  // warns that it travels in clear text without server.tls.
  absl::StatusOr<Config> config = ParseConfig(
      "server: {admin_listen: \"0.0.0.0:8701\", admin_token_file: " + token + "}", kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->server.admin_allow_plaintext_token);
  EXPECT_THAT(PlaintextAdminTokenWarning(config->server),
              HasSubstr("server.admin_listen: '0.0.0.0:8701' is not a loopback address and "
                        "server.tls is off: the admin token travels in clear text"));
  // admin_allow_plaintext_token: false refuses that start.
  absl::StatusOr<Config> strict = ParseConfig(
      "server: {admin_listen: \"0.0.0.0:8701\", admin_allow_plaintext_token: false, "
      "admin_token_file: " +
          token + "}",
      kFile);
  ASSERT_FALSE(strict.ok());
  EXPECT_THAT(strict.status().message(),
              HasSubstr("so the admin token would travel in clear text"));
  // Loopback: no warning.
  absl::StatusOr<Config> local = ParseConfig(
      "server: {admin_listen: \"127.0.0.1:8701\", admin_token_file: " + token + "}", kFile);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(PlaintextAdminTokenWarning(local->server), "");
}

}  // namespace
}  // namespace fuserank::server
