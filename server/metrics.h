// The server's Prometheus metrics (SPEC section 4): every family defined once here, every
// label handle resolved when the server starts, so recording never looks up a string.
// State read from elsewhere (the hot-row caches: hot_row_metrics.h; the batchers' queue
// depth) is pulled by a collect hook that runs before every scrape. One Metrics object per server,
// created first and passed down. Thread-safe.
#ifndef FUSERANK_SERVER_METRICS_H_
#define FUSERANK_SERVER_METRICS_H_

#include <grpcpp/support/status.h>

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/batcher.h"

namespace prometheus {
class Collectable;
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace fuserank::server {

// `rpc` label values: Rank, SetHotRows, GetHotRows, RebuildHotRows, ReloadModel, and the
// KServe v2 calls (kserve_service.h): ModelInfer, ServerLive, ServerReady, ModelReady,
// ServerMetadata, ModelMetadata, ModelConfig, RepositoryIndex.
enum class Rpc {
  kRank,
  kSetHotRows,
  kGetHotRows,
  kRebuildHotRows,
  kReloadModel,
  kModelInfer,
  kServerLive,
  kServerReady,
  kModelReady,
  kServerMetadata,
  kModelMetadata,
  kModelConfig,
  kRepositoryIndex,
};
inline constexpr int kNumRpcs = 13;

// `stage` label values: decode, queue, lookup, cross, dnn, topk, encode.
enum class Stage { kDecode, kQueue, kLookup, kCross, kDnn, kTopk, kEncode };
inline constexpr int kNumStages = 7;

inline constexpr int kNumGrpcCodes = 17;  // OK .. UNAUTHENTICATED

// Embedding-cache counters of one table (written by HotRowMetrics: hot_row_metrics.h).
struct TableCacheMetrics {
  prometheus::Counter* hits = nullptr;
  prometheus::Counter* misses = nullptr;
};

class Metrics {
 public:
  // Defines every family. With a non-empty `listen` ("host:port", port 0: any free port)
  // also serves them at /metrics; an address it cannot bind is an error naming it.
  static absl::StatusOr<std::unique_ptr<Metrics>> Create(const std::string& listen);
  ~Metrics();  // stops the HTTP server

  // The bound /metrics port, 0 when not serving.
  int port() const { return port_; }

  void RecordRequest(Rpc rpc, grpc::StatusCode code, double seconds);
  void RecordStage(Stage stage, double seconds);
  void RecordBatchCandidates(int candidates);
  // fuserank_graph_capture_failures_total: CUDA graph captures that failed (the batch
  // was scored without a graph; the capture is retried with backoff).
  void AddGraphCaptureFailures(uint32_t failures);
  // What one request's result says of the batch it ran in: its queue time, and once per
  // batch (position 0) the batch's candidates, stage times and graph capture failures.
  // Nothing for a request that never ran in a batch (dropped from the queue).
  void RecordResult(const engine::RequestResult& result);
  void AddInflight(int delta);
  // fuserank_queue_depth is `source()` at every collection (each /metrics scrape and each
  // Scrape()): the requests waiting in the batchers then, never a value an earlier request
  // left behind. Replaces the previous source; nullptr removes it (the gauge keeps its last
  // value). Returns once no collection uses the old one, so what it reads may be destroyed
  // after.
  void SetQueueDepthSource(std::function<int()> source);
  // fuserank_model_info{model, version, device} = 1 (SPEC section 4); `device` is a
  // Backend::device() ("cpu", "cuda:0"), exported as its kind ("cpu", "cuda"). The CPU
  // engine's code path is fuserank_cpu_isa_info{isa} (engine/cpu/cpu_simd.h: "avx512",
  // "avx2", "generic"), set once when the metrics are created.
  void SetModelInfo(const std::string& model, const std::string& version,
                    const std::string& device);
  // Drops that series (a version retired by a reload); no-op when it does not exist.
  void RemoveModelInfo(const std::string& model, const std::string& version,
                       const std::string& device);
  // fuserank_backend_failures_total{model, device}: backends of `model` whose device
  // failed (engine/device_fault.h); `device` is the failed Backend::device() ("cuda:0").
  void AddBackendFailure(const std::string& model, const std::string& device);
  // The cache counters of `table` (created on first call; the same handles after). They
  // last for the life of the process: a counter must not vanish or go back.
  TableCacheMetrics Table(const std::string& table);
  // fuserank_hot_rows{table} is `rows`: one series per table listed, set to its value; the
  // series of every table not listed (no served model has it any more) is removed.
  void SetHotRows(const absl::flat_hash_map<std::string, double>& rows);
  void SetHotRowsVersion(double version);

  // `hook` runs before every collection (each /metrics scrape and each Scrape()), on the
  // scraping thread, one at a time, to pull state kept elsewhere into the series. Replaces
  // the previous hook; nullptr removes it. Returns once no call of the old hook runs, so
  // whatever the old hook used may be destroyed after. The hook must not call
  // SetCollectHook or Scrape.
  void SetCollectHook(std::function<void()> hook);

  // Everything in the Prometheus text format (what /metrics serves).
  std::string Scrape() const;
  // The registry, for families defined beside this class (server/remote_metrics.h).
  prometheus::Registry& registry() { return *registry_; }

 private:
  Metrics();
  void RunCollectHook() const;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> collector_;  // registry_ after the hook
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string host_;  // of metrics_listen
  int port_ = 0;

  std::array<std::array<prometheus::Counter*, kNumGrpcCodes>, kNumRpcs> requests_{};
  std::array<prometheus::Histogram*, kNumRpcs> request_duration_{};
  std::array<prometheus::Histogram*, kNumStages> stage_duration_{};
  prometheus::Histogram* batch_candidates_ = nullptr;
  prometheus::Counter* graph_capture_failures_ = nullptr;
  prometheus::Gauge* inflight_ = nullptr;
  prometheus::Gauge* queue_depth_ = nullptr;
  prometheus::Gauge* hot_rows_version_ = nullptr;
  prometheus::Family<prometheus::Gauge>* model_info_ = nullptr;
  prometheus::Family<prometheus::Counter>* cache_lookups_ = nullptr;
  prometheus::Family<prometheus::Counter>* backend_failures_ = nullptr;
  prometheus::Family<prometheus::Gauge>* hot_rows_ = nullptr;

  absl::Mutex tables_mu_;  // only at start and on model load, never per request
  absl::flat_hash_map<std::string, TableCacheMetrics> tables_ ABSL_GUARDED_BY(tables_mu_);
  // The fuserank_hot_rows series there are, by table.
  absl::flat_hash_map<std::string, prometheus::Gauge*> hot_rows_series_ ABSL_GUARDED_BY(tables_mu_);

  mutable absl::Mutex hook_mu_;  // held while the hook runs
  std::function<void()> collect_hook_ ABSL_GUARDED_BY(hook_mu_);
  std::function<int()> queue_depth_source_ ABSL_GUARDED_BY(hook_mu_);
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_METRICS_H_
