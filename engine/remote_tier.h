// The tier behind a model's storage: redis tables: a Redis Cluster client, a near cache
// per table, and the counters the server exports (lookups per tier, remote errors by
// kind, fetch latency). The CPU backend stages each batch's remote rows through it
// (remote_stage.h) before the forward pass. Created once per loaded model; thread-safe.
// The value layout in the cluster is docs/remote-tables.md's: key "<key_prefix><table>:<id>"
// (no hash tag, so a table spreads over every slot), value the row's bytes exactly as the
// safetensors table holds them (dim little-endian elements of the model's embedding_dtype;
// for int8 the dim codes followed by the row's qparams, scale then bias, float32).
#ifndef FUSERANK_ENGINE_REMOTE_TIER_H_
#define FUSERANK_ENGINE_REMOTE_TIER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/batch.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "engine/hot_rows/hot_rows.h"
#include "engine/model.h"
#include "engine/near_cache.h"

namespace fuserank::remote {
class ClusterClient;
}

namespace fuserank::engine {

enum class OnRemoteError { kFail, kZero };

struct RemoteTierOptions {
  std::vector<std::string> seed_nodes;  // "host:port"
  int fetch_deadline_ms = 20;           // per batch: the longest a fetch may take
  int pool_size = 4;                    // idle connections kept per node
  OnRemoteError on_remote_error = OnRemoteError::kFail;
  int64_t near_cache_rows = 65536;  // per table; 0: no near cache
  int near_cache_ttl_ms = 1000;     // how stale a served row may be
  std::string key_prefix = "fuserank:";
};

// Where a lookup of a remote table was served from.
enum class Tier { kHot, kNear, kRemote, kAbsent };
inline constexpr int kTiers = 4;
std::string_view TierName(Tier tier);  // "hot", "near", "remote", "absent"

// Remote error kinds: the cluster client's (remote::ErrorKind, "timeout", "connection",
// "redirect", "cluster_down", "server") and "value_size" (a value of the wrong length).
inline constexpr int kRemoteErrorKinds = 6;
std::string_view RemoteErrorName(int kind);

// Fetch latency buckets (seconds, upper bounds) of RemoteTier::fetch_buckets().
inline constexpr std::array<double, 11> kFetchBuckets = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                                         0.05,   0.1,   0.25,  0.5,   1.0};

struct RemoteTableCounters {
  std::array<std::atomic<uint64_t>, kTiers> lookups{};            // ids, per tier
  std::array<std::atomic<uint64_t>, kRemoteErrorKinds> errors{};  // keys, per kind
};

class RemoteStage;

class RemoteTier : public RemoteRowSource {
 public:
  // Connects to the cluster. When no seed answers, *tier is still set (it keeps trying in
  // the background) and the status is UNAVAILABLE with the seeds' errors: a server with
  // on_remote_error: fail refuses to start on it, one with zero serves zeros meanwhile.
  static absl::Status Create(std::shared_ptr<const Model> model, const RemoteTierOptions& options,
                             std::unique_ptr<RemoteTier>* tier);
  ~RemoteTier() override;

  // Fills `stage` with `batch`'s rows of every remote table: distinct keys not in the
  // near cache are fetched in one pipeline per node, all nodes at once, within
  // fetch_deadline_ms and by batch.deadline (past it no request of the batch can use them). Keys
  // the cluster lacks pool as zeros. Keys it failed to answer pool as zeros too; with kFail every
  // request that needed one gets UNAVAILABLE naming the table in (*request_errors)[r] (left empty
  // when none failed). With `hot` (the batch's hot-row snapshot; may be null), keys in a remote
  // table's hot set are copied from it first (tier "hot", no fetch), then the near cache is asked.
  // With sample_period > 0 about one id use in sample_period is kept in
  // stage->sampled(t), for HotRowManager::ObserveIds (cache.policy: frequency).
  void Stage(const Batch& batch, const HotRowSnapshot* hot, int sample_period, RemoteStage* stage,
             std::vector<absl::Status>* request_errors);

  // RemoteRowSource (HotRowManager::Set of a redis table): fetches `ids` (distinct) in
  // one pipeline per node within kHotFetchDeadlineMs; UNAVAILABLE naming the table and
  // the first failed key's error when any key was not answered. Not counted as lookups.
  static constexpr int kHotFetchDeadlineMs = 10000;
  absl::Status FetchRows(int table, absl::Span<const int64_t> ids, std::vector<std::byte>* values,
                         std::vector<bool>* present) override;

  const Model& model() const { return *model_; }
  const RemoteTierOptions& options() const { return options_; }
  // Unique in the process (an address may be reused by a later tier): metrics key their
  // per-tier state on it.
  uint64_t id() const { return id_; }
  // Per model table (spec order); zeros for local tables.
  const RemoteTableCounters& counters(int table) const { return counters_[table]; }
  // Cumulative fetch counts per kFetchBuckets bound (+Inf last), and the sum of seconds.
  std::array<uint64_t, kFetchBuckets.size() + 1> fetch_buckets() const;
  double fetch_seconds_sum() const;
  // Round trips (node pipelines) and fetches (batches that fetched anything) so far.
  uint64_t round_trips() const { return round_trips_.load(std::memory_order_relaxed); }
  uint64_t fetches() const { return fetches_.load(std::memory_order_relaxed); }
  // Drops every count so far (lookups, errors, fetches: the warm-up's, which are not
  // traffic). REQUIRES: once, after the warm-up and before the version serves (no Stage
  // running).
  void ResetCounts();
  // The cluster key of `id` in table `table`.
  std::string Key(int table, int64_t id) const;
  // Bytes of one value of table `table` in the cluster: row_bytes, plus 8 for int8.
  size_t ValueBytes(int table) const override;

  RemoteTier(const RemoteTier&) = delete;
  RemoteTier& operator=(const RemoteTier&) = delete;

 private:
  friend class RemoteStage;
  RemoteTier(std::shared_ptr<const Model> model, const RemoteTierOptions& options);
  void RecordFetch(double seconds, int round_trips);

  std::shared_ptr<const Model> model_;
  const RemoteTierOptions options_;
  const uint64_t id_;
  std::unique_ptr<remote::ClusterClient> client_;
  std::vector<std::unique_ptr<NearCache>> near_;  // per table; null for local tables
  std::unique_ptr<RemoteTableCounters[]> counters_;
  std::array<std::atomic<uint64_t>, kFetchBuckets.size() + 1> fetch_counts_{};
  std::atomic<uint64_t> fetch_nanos_{0};
  std::atomic<uint64_t> round_trips_{0};
  std::atomic<uint64_t> fetches_{0};
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_REMOTE_TIER_H_
