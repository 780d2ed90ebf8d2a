// Exports the served models' storage: redis tiers (engine/remote_tier.h), in SPEC section
// 4's style: fuserank_embedding_tier_lookups_total{table, tier} (tier: near, remote,
// absent; a redis table has no hot set), fuserank_remote_errors_total{table, kind},
// fuserank_remote_fetch_duration_seconds (one observation per batch that fetched), and
// fuserank_remote_round_trips_total / fuserank_remote_fetches_total (their ratio: node
// pipelines per fetching batch). Read from the tiers' atomic counters in the Metrics collect
// hook (HotRowMetrics calls Update), so nothing is added to the request path. Counters
// follow each tier's counts and add only increases. Thread-safe (one Update at a time).
#ifndef FUSERANK_SERVER_REMOTE_METRICS_H_
#define FUSERANK_SERVER_REMOTE_METRICS_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "engine/remote_tier.h"
#include "server/served_models.h"

namespace prometheus {
class Counter;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace fuserank::server {

// One tier's fetch totals, as last exported or as read now.
struct RemoteFetchTotals {
  std::array<uint64_t, engine::kFetchBuckets.size() + 1> buckets{};  // cumulative
  double seconds = 0;
  uint64_t round_trips = 0;
  uint64_t fetches = 0;
};

// What the fetch-duration histogram gains from `done` to `now`: per-bucket increments
// (non-cumulative, as Histogram::ObserveMultiple takes them) and seconds. False when neither
// moved. Seconds count also when no fetch was added: a tier adds a fetch's count before its
// seconds, so one read may see the count and the next only the seconds.
bool FetchIncrements(const RemoteFetchTotals& done, const RemoteFetchTotals& now,
                     std::vector<double>* increments, double* seconds);

class RemoteMetrics {
 public:
  explicit RemoteMetrics(prometheus::Registry& registry);
  void Update(const std::vector<ModelHandle>& models);

 private:
  // What has been added to the series so far, per tier (RemoteTier::id) and table.
  struct Exported {
    std::array<uint64_t, engine::kTiers> lookups{};
    std::array<uint64_t, engine::kRemoteErrorKinds> errors{};
  };

  prometheus::Family<prometheus::Counter>* lookups_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Histogram* fetch_seconds_;
  prometheus::Counter* round_trips_;
  prometheus::Counter* fetches_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::pair<uint64_t, int>, Exported> exported_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, RemoteFetchTotals> totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_REMOTE_METRICS_H_
