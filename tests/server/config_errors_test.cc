// Configs the server refuses: each bad value, key or combination with the file, the key and
// the reason on a line of its own, and every problem of a file reported together.
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

constexpr char kFile[] = "config/x.yaml";

struct BadConfigCase {
  std::string name;
  std::string yaml;
  std::string message;  // expected as a whole line of the error
};

void PrintTo(const BadConfigCase& c, std::ostream* os) { *os << c.name; }

class BadConfigTest : public ::testing::TestWithParam<BadConfigCase> {};

TEST_P(BadConfigTest, IsRefusedNamingFileKeyAndReason) {
  absl::StatusOr<Config> config = ParseConfig(GetParam().yaml, kFile);
  ASSERT_FALSE(config.ok()) << GetParam().yaml;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::string> lines = absl::StrSplit(config.status().message(), '\n');
  EXPECT_THAT(lines, ::testing::Contains(HasSubstr(GetParam().message)))
      << config.status().message();
  for (const std::string& line : lines) EXPECT_THAT(line, ::testing::StartsWith("config/x.yaml: "));
}

INSTANTIATE_TEST_SUITE_P(
    Rows, BadConfigTest,
    ::testing::Values(
        BadConfigCase{"streams_zero", "engine: {streams: 0}",
                      "config/x.yaml: engine.streams: must be in 1..64, got 0"},
        BadConfigCase{"streams_not_int", "engine: {streams: four}",
                      "config/x.yaml: engine.streams: must be an integer or auto, got 'four'"},
        BadConfigCase{"quoted_number", "engine: {streams: \"4\"}",
                      "engine.streams: must be an integer or auto, got the string '4'"},
        BadConfigCase{"quoted_auto", "engine: {streams: \"auto\"}",
                      "engine.streams: must be an integer or auto, got the string 'auto'"},
        BadConfigCase{"inflight", "server: {max_inflight_requests: -1}",
                      "server.max_inflight_requests: must be in 0..1048576, got -1"},
        BadConfigCase{"concurrent_streams", "server: {max_concurrent_streams: -3}",
                      "server.max_concurrent_streams: must be in 0..1048576, got -3"},
        BadConfigCase{"transport_memory", "server: {transport_memory_bytes: 1000}",
                      "server.transport_memory_bytes: must be in 1048576..1099511627776, got 1000"},
        BadConfigCase{"cpu_precision", "engine: {cpu_precision: fp16}",
                      "engine.cpu_precision: must be one of"},
        BadConfigCase{"cpu_precision_on_cuda", "engine: {device: cuda, cpu_precision: bf16}",
                      "engine.cpu_precision: bf16 applies to the CPU engine only"},
        BadConfigCase{"queue_delay", "engine: {max_queue_delay_ms: -1}",
                      "engine.max_queue_delay_ms: must be in 0..3600000, got -1"},
        BadConfigCase{"batch_ids", "engine: {max_batch_ids: 0}",
                      "engine.max_batch_ids: must be in 1..67108864, got 0"},
        BadConfigCase{"queued_below_batch", "engine: {max_batch_ids: 100, max_queued_ids: 50}",
                      "engine.max_queued_ids: must be at least engine.max_batch_ids (100) so "
                      "that one request can queue, got 50"},
        BadConfigCase{"float_for_int", "server: {max_candidates: 1.5}",
                      "server.max_candidates: must be an integer, got '1.5'"},
        BadConfigCase{"int_overflow", "server: {max_candidates: 99999999999}",
                      "server.max_candidates: is out of range, got 99999999999"},
        BadConfigCase{"unknown_key", "engine: {stream: 4}",
                      "config/x.yaml: engine.stream: unknown key (known here: device, gpu"},
        BadConfigCase{"unknown_section", "serverz: {}", "serverz: unknown key"},
        BadConfigCase{"unknown_tls_key", "server: {tls: {cert: a}}",
                      "server.tls.cert: unknown key"},
        BadConfigCase{"duplicate_key", "engine:\n  streams: 2\n  streams: 3\n",
                      "engine.streams: given more than once"},
        BadConfigCase{"section_not_map", "engine: 5", "engine: must be a map, got '5'"},
        BadConfigCase{"top_level_list", "- a", "(top level): must be a map of sections"},
        BadConfigCase{"device", "engine: {device: gpu}",
                      "engine.device: must be one of auto|cpu|cuda, got 'gpu'"},
        BadConfigCase{"bool", "engine: {cuda_graphs: maybe}",
                      "engine.cuda_graphs: must be true or false, got 'maybe'"},
        BadConfigCase{"policy", "cache: {policy: lru}",
                      "cache.policy: must be one of static|frequency, got 'lru'"},
        BadConfigCase{"placement", "cache: {placement: disk}",
                      "cache.placement: must be one of device|host, got 'disk'"},
        BadConfigCase{"format", "logging: {format: xml}",
                      "logging.format: must be one of text|json, got 'xml'"},
        BadConfigCase{"level", "logging: {level: loud}", "logging.level: must be one of trace|"},
        BadConfigCase{"sample_range", "logging: {access_log_sample: 1.5}",
                      "logging.access_log_sample: must be in 0..1, got 1.5"},
        BadConfigCase{"string_is_list", "server: {listen: [a]}",
                      "server.listen: must be a string, got a list"},
        BadConfigCase{"listen_no_port", "server: {listen: 0.0.0.0}",
                      "server.listen: must be host:port"},
        BadConfigCase{"listen_bad_port", "server: {listen: \"0.0.0.0:70000\"}",
                      "server.listen: must be host:port"},
        BadConfigCase{"listen_bad_ipv4", "server: {listen: \"300.1.1.1:80\"}",
                      "not an IPv4 address"},
        BadConfigCase{"listen_bare_ipv6", "server: {listen: \"::1:80\"}", "in brackets"},
        BadConfigCase{"listen_empty", "server: {listen: \"\"}", "server.listen: must not be empty"},
        BadConfigCase{"same_port",
                      "server: {listen: \"0.0.0.0:9000\", metrics_listen: \"0.0.0.0:9000\"}",
                      "server.metrics_listen: '0.0.0.0:9000' is also server.listen"},
        BadConfigCase{"admin_public_without_token", "server: {admin_listen: \"0.0.0.0:8701\"}",
                      "server.admin_listen: '0.0.0.0:8701' is not a loopback address, so "
                      "server.admin_token_file must be set"},
        BadConfigCase{"token_file_missing", "server: {admin_token_file: /nonexistent/token}",
                      "server.admin_token_file: cannot read '/nonexistent/token'"},
        BadConfigCase{"admin_dns_name_is_no_loopback",
                      "server: {admin_listen: \"127.attacker.example:8701\"}",
                      "server.admin_listen: '127.attacker.example:8701' is not a loopback "
                      "address, so server.admin_token_file must be set"},
        BadConfigCase{"admin_token_in_clear_text",
                      "server: {admin_listen: \"0.0.0.0:8701\", admin_token_file: /etc/hostname, "
                      "admin_allow_plaintext_token: false}",
                      "server.admin_listen: '0.0.0.0:8701' is not a loopback address and "
                      "server.tls is off, so the admin token would travel in clear text"},
        BadConfigCase{"token_file_directory", "server: {admin_token_file: /etc}",
                      "server.admin_token_file: file '/etc' is a directory, not a regular file"},
        BadConfigCase{"frequency_capacity",
                      "cache: {policy: frequency, hot_rows_per_table: 1048577}",
                      "cache.hot_rows_per_table: must be at most 1048576 with cache.policy: "
                      "frequency"},
        BadConfigCase{"tls_half", "server: {tls: {cert_file: /etc/hostname}}",
                      "server.tls.key_file: server.tls.cert_file and server.tls.key_file must be "
                      "set together"},
        BadConfigCase{"tls_ca_alone", "server: {tls: {client_ca_file: /etc/hostname}}",
                      "server.tls.client_ca_file: requires server.tls.cert_file"},
        BadConfigCase{"request_bytes", "server: {max_request_bytes: 0}",
                      "server.max_request_bytes: must be in 1..1073741824, got 0"},
        BadConfigCase{"max_candidates", "server: {max_candidates: 0}",
                      "server.max_candidates: must be in 1..1048576, got 0"},
        BadConfigCase{"max_ids", "server: {max_ids_per_feature: -1}",
                      "server.max_ids_per_feature: must be in 1..1048576, got -1"},
        BadConfigCase{"grace", "server: {shutdown_grace_seconds: -1}",
                      "server.shutdown_grace_seconds: must be in 0..3600, got -1"},
        BadConfigCase{"wait", "engine: {max_batch_wait_us: -5}",
                      "engine.max_batch_wait_us: must be in 0..1000000, got -5"},
        BadConfigCase{"queue", "engine: {queue_capacity: 0}",
                      "engine.queue_capacity: must be in 1..1048576, got 0"},
        BadConfigCase{"cpu_threads", "engine: {cpu_threads: 0}",
                      "engine.cpu_threads: must be in 1..1024, got 0"},
        BadConfigCase{"gpu", "engine: {gpu: -1}", "engine.gpu: must be in 0..1023, got -1"},
        BadConfigCase{"hot_rows", "cache: {hot_rows_per_table: -1}",
                      "cache.hot_rows_per_table: must be in 0..536870912, got -1"},
        BadConfigCase{"rebuild", "cache: {rebuild_interval_seconds: 0}",
                      "cache.rebuild_interval_seconds: must be in 1..86400, got 0"},
        BadConfigCase{"shared_rows", "cache: {shared_memory_rows: 8}",
                      "cache.shared_memory_rows: only 0 is implemented (no hot rows are staged "
                      "in GPU shared memory yet), got 8"},
        BadConfigCase{"placement_host_auto", "cache: {placement: host}",
                      "cache.placement: host places the CUDA backend's tables in host memory "
                      "behind a GPU hot-row cache; it needs engine.device: cuda (got auto"},
        BadConfigCase{"placement_host_cpu", "engine: {device: cpu}\ncache: {placement: host}",
                      "it needs engine.device: cuda (got cpu; the CPU engine's tables are in "
                      "host memory anyway: use placement: device)"},
        BadConfigCase{"model_path_empty", "model: {path: \"\"}", "model.path: must not be empty"},
        BadConfigCase{"model_unknown_key", "model: {file: a.yaml}", "model.file: unknown key"},
        BadConfigCase{"model_and_models", "model: {path: a.yaml}\nmodels: [{path: b.yaml}]",
                      "models: give either model.path or models, not both"},
        BadConfigCase{"models_not_list", "models: a.yaml", "models: must be a list"},
        BadConfigCase{"models_empty", "models: []", "models: must list at least one model"},
        BadConfigCase{"models_duplicate", "models: [{name: a, path: x}, {name: a, path: y}]",
                      "models[1].name: 'a' is also models[0].name"},
        BadConfigCase{"models_entry_path", "models: [{name: a}]",
                      "models[0].path: must not be empty"},
        BadConfigCase{"syntax", "engine: {streams: [1,\n", "YAML syntax error"},
        // Two listeners on one port where one is a wildcard address: the bind would fail.
        BadConfigCase{"wildcard_port_shared",
                      "server: {listen: \"0.0.0.0:8700\", admin_listen: \"127.0.0.1:8700\"}",
                      "server.admin_listen: '127.0.0.1:8700' shares port 8700 with "
                      "server.listen '0.0.0.0:8700'"},
        BadConfigCase{"wildcard6_port_shared", "server: {metrics_listen: \"[::]:8700\"}",
                      "server.metrics_listen: '[::]:8700' shares port 8700 with server.listen"},
        BadConfigCase{"seed_node_bad_host", "remote: {seed_nodes: [\"a b:6379\"]}",
                      "remote.seed_nodes[0]: must be host:port"},
        BadConfigCase{"seed_node_ipv6_unbracketed", "remote: {seed_nodes: [\"ok:1\", \"::1:80\"]}",
                      "remote.seed_nodes[1]: must be host:port (e.g. 0.0.0.0:8700 or [::]:8700), "
                      "got '::1:80': write IPv6 addresses in brackets"},
        BadConfigCase{"seed_node_port_zero", "remote: {seed_nodes: [\"redis:0\"]}",
                      "remote.seed_nodes[0]: 'redis:0': a cluster node needs a port in 1..65535"},
        BadConfigCase{"key_prefix_hash_tag", "remote: {key_prefix: \"{fuserank}:\"}",
                      "remote.key_prefix: '{fuserank}:' has a '{': Redis Cluster would hash only "
                      "the text between '{' and '}' (a hash tag) and put a whole table on one "
                      "slot"},
        // Integers in decimal only: YAML would read 0200 as octal 128.
        BadConfigCase{"octal", "engine: {max_batch_wait_us: 0200}",
                      "engine.max_batch_wait_us: must be an integer written in decimal (no "
                      "leading zero, sign + or 0x/0o prefix: YAML would read 0200 as octal 128), "
                      "got '0200'"},
        BadConfigCase{"hex", "server: {max_candidates: 0x100}",
                      "server.max_candidates: must be an integer written in decimal"},
        BadConfigCase{"plus_sign", "server: {max_candidates: +100}",
                      "server.max_candidates: must be an integer written in decimal"},
        BadConfigCase{"octal_in_auto", "engine: {streams: 010}",
                      "engine.streams: must be an integer or auto written in decimal"},
        BadConfigCase{"int64_overflow", "server: {max_request_bytes: 9223372036854775808}",
                      "server.max_request_bytes: is out of range (a 64-bit integer), got "
                      "'9223372036854775808'"},
        BadConfigCase{"tagged_number", "server: {max_candidates: !!str 10}",
                      "server.max_candidates: must be an integer, got '10' tagged "
                      "tag:yaml.org,2002:str"},
        BadConfigCase{"yaml11_bool", "engine: {cuda_graphs: yes}",
                      "engine.cuda_graphs: must be true or false, got 'yes'"},
        BadConfigCase{"range_shows_the_double", "logging: {access_log_sample: 1.0000001}",
                      "logging.access_log_sample: must be in 0..1, got 1.0000001"},
        BadConfigCase{"two_documents", "server: {max_candidates: 10}\n---\nserver: {}\n",
                      "config/x.yaml: (file): holds more than one YAML document, or text YAML "
                      "cannot read as one (a second document after ---, or a stray ',' at the "
                      "top level); give one"},
        // An alias repeats its anchor's node: a few KB could stand for millions of keys.
        BadConfigCase{"anchor_and_alias", "models:\n  - &m {name: a, path: a.yaml}\n  - *m\n",
                      "config/x.yaml: line 2, column 5: YAML anchors (&name) and aliases "
                      "(*name) are not accepted (anchor '&m'); write each value out where it is "
                      "used"},
        // yaml-cpp reads this as one empty document (all defaults); its LoadAll never ends.
        BadConfigCase{"stray_comma", ", server: {max_candidates: 10}\n",
                      "config/x.yaml: (file): holds more than one YAML document"}),
    [](const ::testing::TestParamInfo<BadConfigCase>& info) { return info.param.name; });

TEST(ConfigTest, ReportsEveryProblemTogether) {
  const char* yaml = R"(
server: {max_candidates: 0, listen: nowhere}
engine: {streams: 0, device: tpu, colour: red}
logging: {format: xml}
extra: 1
)";
  absl::StatusOr<Config> config = ParseConfig(yaml, kFile);
  ASSERT_FALSE(config.ok());
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("config/x.yaml: server.max_candidates: must be in"));
  EXPECT_THAT(message, HasSubstr("config/x.yaml: server.listen: must be host:port"));
  EXPECT_THAT(message, HasSubstr("config/x.yaml: engine.streams: must be in 1..64, got 0"));
  EXPECT_THAT(message, HasSubstr("config/x.yaml: engine.device: must be one of"));
  EXPECT_THAT(message, HasSubstr("config/x.yaml: engine.colour: unknown key"));
  EXPECT_THAT(message, HasSubstr("config/x.yaml: logging.format: must be one of"));
  EXPECT_THAT(message, HasSubstr("config/x.yaml: extra: unknown key"));
  const std::vector<std::string> lines = absl::StrSplit(message, '\n');
  EXPECT_EQ(lines.size(), 7u) << message;
}

}  // namespace
}  // namespace fuserank::server
