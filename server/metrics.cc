#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_simd.h"
#include "server/grpc_status.h"

namespace fuserank::server {
namespace {

constexpr const char* kRpcNames[kNumRpcs] = {
    "Rank",          "SetHotRows",  "GetHotRows",     "RebuildHotRows", "ReloadModel",
    "ModelInfer",    "ServerLive",  "ServerReady",    "ModelReady",     "ServerMetadata",
    "ModelMetadata", "ModelConfig", "RepositoryIndex"};
// In the order of enum Stage.
constexpr const char* kStageNames[kNumStages] = {"decode", "queue", "lookup", "cross",
                                                 "dnn",    "topk",  "encode"};

// civetweb serves one connection per worker thread and waits up to request_timeout_ms for
// each read or write, so a peer that sends part of a request holds a worker that long (the
// default is 30 s). Two workers meant two idle connections stopped every scrape for 30 s;
// these are enough that a few do not, and short enough that more free a worker in seconds,
// still far more than any scraper needs to send a GET.
constexpr int kExposerThreads = 16;
constexpr int kExposerRequestTimeoutMs = 5000;

// 10 us .. 10 s, 1-2.5-5 per decade.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double decade = 1e-5; decade < 10.0; decade *= 10) {
    for (double step : {1.0, 2.5, 5.0}) buckets.push_back(decade * step);
  }
  buckets.push_back(10.0);
  return buckets;
}

// 1, 2, 4, ... 65536 candidates.
prometheus::Histogram::BucketBoundaries CandidateBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double n = 1; n <= 65536; n *= 2) buckets.push_back(n);
  return buckets;
}

// What the Exposer collects: the registry, after the collect hook has run.
class HookedCollectable : public prometheus::Collectable {
 public:
  HookedCollectable(std::function<void()> before, std::shared_ptr<prometheus::Registry> registry)
      : before_(std::move(before)), registry_(std::move(registry)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    before_();
    return registry_->Collect();
  }

 private:
  const std::function<void()> before_;
  const std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  collector_ = std::make_shared<HookedCollectable>([this] { RunCollectHook(); }, registry_);
  auto& requests = prometheus::BuildCounter()
                       .Name("fuserank_requests_total")
                       .Help("RPCs finished, by method and gRPC status code")
                       .Register(*registry_);
  auto& duration = prometheus::BuildHistogram()
                       .Name("fuserank_request_duration_seconds")
                       .Help("RPC latency from arrival to Finish, by method")
                       .Register(*registry_);
  for (int r = 0; r < kNumRpcs; ++r) {
    for (int code = 0; code < kNumGrpcCodes; ++code) {
      requests_[r][code] =
          &requests.Add({{"rpc", kRpcNames[r]},
                         {"code", std::string(GrpcCodeName(static_cast<grpc::StatusCode>(code)))}});
    }
    request_duration_[r] = &duration.Add({{"rpc", kRpcNames[r]}}, LatencyBuckets());
  }
  auto& stages = prometheus::BuildHistogram()
                     .Name("fuserank_stage_duration_seconds")
                     .Help(
                         "Time per request-path stage: decode, queue, lookup, cross, dnn, "
                         "topk, encode")
                     .Register(*registry_);
  for (int s = 0; s < kNumStages; ++s) {
    stage_duration_[s] = &stages.Add({{"stage", kStageNames[s]}}, LatencyBuckets());
  }
  batch_candidates_ = &prometheus::BuildHistogram()
                           .Name("fuserank_batch_candidates")
                           .Help("Candidates per batch run by the engine")
                           .Register(*registry_)
                           .Add({}, CandidateBuckets());
  graph_capture_failures_ = &prometheus::BuildCounter()
                                 .Name("fuserank_graph_capture_failures_total")
                                 .Help(
                                     "CUDA graph captures that failed; those batches ran "
                                     "without a graph and the capture is retried with backoff")
                                 .Register(*registry_)
                                 .Add({});
  inflight_ = &prometheus::BuildGauge()
                   .Name("fuserank_inflight_requests")
                   .Help("Rank and ModelInfer RPCs received and not yet finished")
                   .Register(*registry_)
                   .Add({});
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("fuserank_queue_depth")
                      .Help("Requests waiting in the batcher queue")
                      .Register(*registry_)
                      .Add({});
  model_info_ = &prometheus::BuildGauge()
                     .Name("fuserank_model_info")
                     .Help("1 for each model served, with its version and device")
                     .Register(*registry_);
  prometheus::BuildGauge()
      .Name("fuserank_cpu_isa_info")
      .Help(
          "1, labelled with the instruction set the CPU engine runs on in this process "
          "(avx512, avx2, generic)")
      .Register(*registry_)
      .Add({{"isa", engine::CpuIsaName(engine::GetCpuDispatch().isa)}})
      .Set(1);
  cache_lookups_ = &prometheus::BuildCounter()
                        .Name("fuserank_embedding_cache_lookups_total")
                        .Help(
                            "Embedding row lookups by table, served from the hot set (hit) "
                            "or not (miss)")
                        .Register(*registry_);
  backend_failures_ = &prometheus::BuildCounter()
                           .Name("fuserank_backend_failures_total")
                           .Help(
                               "Backends whose device failed (a fault after which it runs "
                               "nothing more), by model and device")
                           .Register(*registry_);
  hot_rows_ = &prometheus::BuildGauge()
                   .Name("fuserank_hot_rows")
                   .Help("Rows in each table's hot set")
                   .Register(*registry_);
  hot_rows_version_ = &prometheus::BuildGauge()
                           .Name("fuserank_hot_rows_version")
                           .Help("Version of the hot-row sets; +1 per successful swap")
                           .Register(*registry_)
                           .Add({});
}

namespace {

// Opens and closes a TCP connection to `host`:`port` (best effort).
void Poke(const std::string& host, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (host.empty() || host == "0.0.0.0" ||
      inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  close(fd);
}

}  // namespace

Metrics::~Metrics() {
  if (exposer_ == nullptr) return;
  // civetweb's accept loop polls with a 2 s timeout and notices the stop only after it,
  // so stopping takes up to 2 s. A connection wakes the poll: poke until it has stopped.
  std::atomic<bool> stopped{false};
  std::thread stopper([this, &stopped] {
    exposer_.reset();
    stopped = true;
  });
  for (int i = 0; i < 200 && !stopped; ++i) {
    Poke(host_, port_);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stopper.join();
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(const std::string& listen) {
  std::unique_ptr<Metrics> metrics(new Metrics());
  if (listen.empty()) return metrics;
  // prometheus-cpp and civetweb report errors by throwing; nothing of ours throws.
  try {
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", listen, "num_threads", std::to_string(kExposerThreads),
        "request_timeout_ms", std::to_string(kExposerRequestTimeoutMs)});
    metrics->exposer_->RegisterCollectable(metrics->collector_, "/metrics");
    const std::vector<int> ports = metrics->exposer_->GetListeningPorts();
    metrics->port_ = ports.empty() ? 0 : ports[0];
    metrics->host_ = listen.substr(0, listen.rfind(':'));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("server.metrics_listen: cannot serve /metrics on '", listen, "': ", e.what(),
                     " (is the port in use? IPv6 addresses are not supported here)"));
  }
  return metrics;
}

void Metrics::RecordRequest(Rpc rpc, grpc::StatusCode code, double seconds) {
  const int r = static_cast<int>(rpc);
  int c = static_cast<int>(code);
  if (c < 0 || c >= kNumGrpcCodes) c = static_cast<int>(grpc::StatusCode::UNKNOWN);
  requests_[r][c]->Increment();
  request_duration_[r]->Observe(seconds);
}

void Metrics::RecordStage(Stage stage, double seconds) {
  stage_duration_[static_cast<int>(stage)]->Observe(seconds);
}

void Metrics::RecordBatchCandidates(int candidates) { batch_candidates_->Observe(candidates); }

void Metrics::AddGraphCaptureFailures(uint32_t failures) {
  graph_capture_failures_->Increment(failures);
}

void Metrics::RecordResult(const engine::RequestResult& result) {
  if (result.batch_requests == 0) return;  // it never ran in a batch
  RecordStage(Stage::kQueue, result.queue_seconds);
  if (result.position != 0) return;  // the batch's figures come with its first request
  RecordBatchCandidates(result.batch_candidates);
  if (result.graph_capture_failures > 0) AddGraphCaptureFailures(result.graph_capture_failures);
  if (!result.stages.timed) return;  // a CUDA graph replay outside the sampled share
  RecordStage(Stage::kLookup, result.stages.lookup);
  RecordStage(Stage::kCross, result.stages.cross);
  RecordStage(Stage::kDnn, result.stages.dnn);
  RecordStage(Stage::kTopk, result.stages.topk);
}

void Metrics::AddInflight(int delta) { inflight_->Increment(delta); }

void Metrics::SetQueueDepthSource(std::function<int()> source) {
  absl::MutexLock lock(&hook_mu_);
  queue_depth_source_ = std::move(source);
}

namespace {

// The `device` label is the kind of device: "cuda:0" is exported as "cuda".
std::string DeviceKind(const std::string& device) { return device.substr(0, device.find(':')); }

}  // namespace

void Metrics::SetModelInfo(const std::string& model, const std::string& version,
                           const std::string& device) {
  model_info_->Add({{"model", model}, {"version", version}, {"device", DeviceKind(device)}}).Set(1);
}

void Metrics::RemoveModelInfo(const std::string& model, const std::string& version,
                              const std::string& device) {
  const prometheus::Labels labels{
      {"model", model}, {"version", version}, {"device", DeviceKind(device)}};
  if (model_info_->Has(labels)) model_info_->Remove(&model_info_->Add(labels));
}

void Metrics::AddBackendFailure(const std::string& model, const std::string& device) {
  backend_failures_->Add({{"model", model}, {"device", device}}).Increment();
}

TableCacheMetrics Metrics::Table(const std::string& table) {
  absl::MutexLock lock(&tables_mu_);
  auto [it, inserted] = tables_.try_emplace(table);
  if (inserted) {
    it->second.hits = &cache_lookups_->Add({{"table", table}, {"result", "hit"}});
    it->second.misses = &cache_lookups_->Add({{"table", table}, {"result", "miss"}});
  }
  return it->second;
}

void Metrics::SetHotRows(const absl::flat_hash_map<std::string, double>& rows) {
  absl::MutexLock lock(&tables_mu_);
  for (auto it = hot_rows_series_.begin(); it != hot_rows_series_.end();) {
    if (rows.contains(it->first)) {
      ++it;
      continue;
    }
    hot_rows_->Remove(it->second);
    hot_rows_series_.erase(it++);
  }
  for (const auto& [table, value] : rows) {
    prometheus::Gauge*& series = hot_rows_series_[table];
    if (series == nullptr) series = &hot_rows_->Add({{"table", table}});
    series->Set(value);
  }
}

void Metrics::SetHotRowsVersion(double version) { hot_rows_version_->Set(version); }

void Metrics::SetCollectHook(std::function<void()> hook) {
  absl::MutexLock lock(&hook_mu_);
  collect_hook_ = std::move(hook);
}

void Metrics::RunCollectHook() const {
  absl::MutexLock lock(&hook_mu_);
  if (collect_hook_) collect_hook_();
  if (queue_depth_source_) queue_depth_->Set(queue_depth_source_());
}

std::string Metrics::Scrape() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, collector_->Collect());
  return out.str();
}

}  // namespace fuserank::server
