// Exports the served models' hot-row caches as fuserank_embedding_cache_lookups_total,
// fuserank_hot_rows and fuserank_hot_rows_version (SPEC section 4). It reads every
// current version's HotRowCache (a few atomic loads per table) from a Metrics collect
// hook, so the series are fresh at every scrape and nothing is added to the request path.
// SPEC section 4 gives these series no `model` label, so with several models a table
// name that two models share is one series: their hits, misses and hot rows are summed;
// fuserank_hot_rows_version is the sum of the models' hot-row versions (with one model,
// its version; it goes up by one with every successful swap in any model).
// Counters never go back: each (model, table)'s counts are followed and only their
// increases are added, across reloads too; a (model, table) that a reload drops is
// forgotten, so if a later version has it again its counts (from 0) are added. The counters
// of a table last for the process; its fuserank_hot_rows series goes once no served model
// has the table. Thread-safe.
#ifndef FUSERANK_SERVER_HOT_ROW_METRICS_H_
#define FUSERANK_SERVER_HOT_ROW_METRICS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics.h"
#include "server/remote_metrics.h"
#include "server/served_models.h"

namespace fuserank::server {

class HotRowMetrics {
 public:
  // Installs the collect hook on `metrics`. Both must outlive this object.
  HotRowMetrics(const ServedModels* models, Metrics* metrics);
  ~HotRowMetrics();  // removes the hook, waiting for a scrape that runs it

  // Brings the series up to date (what the hook does before each scrape).
  void Update();

  HotRowMetrics(const HotRowMetrics&) = delete;
  HotRowMetrics& operator=(const HotRowMetrics&) = delete;

 private:
  struct Counts {
    uint64_t hits = 0;
    uint64_t misses = 0;
  };

  const ServedModels* const models_;
  Metrics* const metrics_;
  RemoteMetrics remote_;  // the storage: redis tiers' series, updated by the same hook
  absl::Mutex mu_;
  // (model, table) -> the counts already added to the counters.
  absl::flat_hash_map<std::pair<std::string, std::string>, Counts> exported_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_HOT_ROW_METRICS_H_
