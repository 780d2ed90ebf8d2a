#include "server/hot_row_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <vector>

#include "absl/container/flat_hash_set.h"

namespace fuserank::server {

HotRowMetrics::HotRowMetrics(const ServedModels* models, Metrics* metrics)
    : models_(models), metrics_(metrics), remote_(metrics->registry()) {
  metrics_->SetCollectHook([this] { Update(); });
}

HotRowMetrics::~HotRowMetrics() { metrics_->SetCollectHook(nullptr); }

void HotRowMetrics::Update() {
  absl::MutexLock lock(&mu_);
  uint64_t version = 0;
  absl::flat_hash_map<std::string, double> hot_rows;
  absl::flat_hash_set<std::pair<std::string, std::string>> seen;  // (model, table) read now
  for (const ModelHandle& served : models_->Current()) {
    if (served->hot_rows == nullptr) continue;
    absl::StatusOr<engine::HotRowsStatus> status = served->hot_rows->Get({});
    if (!status.ok()) continue;  // Get of all tables does not fail
    version += status->version;
    for (const engine::TableHotRowsStatus& t : status->tables) {
      const TableCacheMetrics series = metrics_->Table(t.table);
      seen.insert({served->name, t.table});
      Counts& done = exported_[{served->name, t.table}];
      // A reload carries the counts over, but requests finishing on the retired version
      // may have moved them past the new version's start: never count back.
      if (t.hits > done.hits) {
        series.hits->Increment(static_cast<double>(t.hits - done.hits));
        done.hits = t.hits;
      }
      if (t.misses > done.misses) {
        series.misses->Increment(static_cast<double>(t.misses - done.misses));
        done.misses = t.misses;
      }
      hot_rows[t.table] += t.hot_rows;
    }
  }
  // A table a reload dropped starts again from 0 if a later version has it again (nothing
  // carries over to it): follow its counts from there, not from the old total.
  absl::erase_if(exported_, [&seen](const auto& entry) { return !seen.contains(entry.first); });
  // A table no served model has any more loses its series (its counters stay).
  metrics_->SetHotRows(hot_rows);
  metrics_->SetHotRowsVersion(static_cast<double>(version));
  remote_.Update(models_->Current());
}

}  // namespace fuserank::server
