// The hot-row cache of one served model version (cache.*): the engine's HotRowManager that
// the version's backend reads (BackendOptions::hot_rows), for cache.policy: frequency the
// PeriodicRebuilder that refreshes it, and what it takes over from the version it replaces
// on a reload: the hot-row version, the hot sets, the hit and miss counts (also those the
// replaced version counts after the hand-over, from requests that finish on it: added when
// it is destroyed). Owned by its ServedModel, declared before the backend, which it
// outlives. Thread-safe.
#ifndef FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_CACHE_H_
#define FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/config_defaults.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "engine/hot_rows/hot_row_rebuilder.h"
#include "engine/model.h"

namespace fuserank::engine {

struct HotRowCacheOptions {
  int capacity = defaults::kHotRowsPerTable;  // cache.hot_rows_per_table
  bool frequency = false;  // cache.policy: frequency: sample accesses, rebuild periodically
  absl::Duration rebuild_interval =
      absl::Seconds(defaults::kRebuildIntervalSeconds);  // cache.rebuild_interval_seconds
};

class HotRowCache {
 public:
  // An empty cache for version `model` of served model `name`. Its hot-row version starts
  // at `previous`'s (the version this one will replace; null: none, start at 0), so that
  // the version a client or Prometheus sees never goes back across a reload.
  // Hot-set changes of `previous` may go on until StartServing and CatchUp take them over.
  static absl::StatusOr<std::unique_ptr<HotRowCache>> Create(std::string name,
                                                             std::shared_ptr<const Model> model,
                                                             const HotRowCacheOptions& options,
                                                             const HotRowCache* previous);
  // Stops the rebuilder before the manager goes. When a successor took this version's counts
  // over (StartServing), adds what was counted here since to the successor's counts.
  ~HotRowCache();

  // For BackendOptions::hot_rows (lives as long as this cache).
  HotRowManager* manager() { return manager_.get(); }
  // For BackendOptions::sample_accesses.
  bool samples_accesses() const { return options_.frequency; }

  // Once the version is built and warmed up, just before it serves. Lookups counted so far
  // (the warm-up's) are left out of the hits and misses; `previous`'s counts carry over by
  // table name, and its hot set is re-installed for every table that still has the same
  // name and row count, all in one swap (version + 1; none when no such set has rows; a
  // refusal is logged and the tables start empty). Then, for the frequency policy, starts
  // the periodic rebuilds. REQUIRES: called once, before the version is shared.
  void StartServing(const HotRowCache* previous);

  // Takes over what changed in `previous`'s hot sets since StartServing(previous): when
  // its hot-row version moved, this version's moves past it and every table with the same
  // name and row count gets `previous`'s set (an emptied one too), in one swap. Nothing
  // when nothing changed. REQUIRES: after StartServing(previous), before this version is
  // shared; no hot-set change of `previous` from this call until the swap
  // (ServedModels::Reload holds the model's serving lock and has paused `previous`'s
  // rebuilds).
  void CatchUp(const HotRowCache& previous);

  // HotRowManager's Set / Get / Rebuild (errors as there), with hits and misses counted
  // since the server started serving the model: the warm-up left out, the counts of the
  // versions this one replaced added (those they counted after the hand-over once they
  // have been destroyed).
  absl::StatusOr<HotRowsStatus> Set(absl::Span<const TableIds> tables);
  absl::StatusOr<HotRowsStatus> Get(absl::Span<const std::string> tables) const;
  absl::StatusOr<HotRowsStatus> Rebuild(absl::Span<const std::string> tables);
  uint64_t version() const { return manager_->version(); }

  // Stop and restart the periodic rebuilds (a reload pauses them on the serving version
  // while it copies that version's state, and resumes them when the new version is
  // refused). Pause returns once a rebuild in progress has finished. Idempotent; Resume
  // does nothing for the static policy or before StartServing.
  void PauseRebuilds();
  void ResumeRebuilds();
  bool rebuilds_running() const;

  HotRowCache(const HotRowCache&) = delete;
  HotRowCache& operator=(const HotRowCache&) = delete;

 private:
  // Added to the manager's raw counts of one table: carried - warm-up (mod 2^64).
  struct Offset {
    uint64_t hits = 0;
    uint64_t misses = 0;
  };

  // What the versions this one replaced counted after they handed their counts over (to
  // this version), by table name: added to as each is destroyed. Once this version is
  // destroyed too, what still arrives goes on to its successor's (`forward`).
  struct LateCounts {
    void Add(const std::string& table, Offset counts);
    absl::Mutex mu;
    absl::flat_hash_map<std::string, Offset> by_table ABSL_GUARDED_BY(mu);
    std::shared_ptr<LateCounts> forward ABSL_GUARDED_BY(mu);
  };

  HotRowCache(std::string name, const HotRowCacheOptions& options,
              std::unique_ptr<HotRowManager> manager);
  // The raw counts plus offsets_ and the late counts of `late`. REQUIRES: late_->mu held
  // when `late` is late_'s. Adjusted: the same with late_'s, locked here.
  absl::StatusOr<HotRowsStatus> WithCounts(
      absl::StatusOr<HotRowsStatus> status,
      const absl::flat_hash_map<std::string, Offset>& late) const;
  absl::StatusOr<HotRowsStatus> Adjusted(absl::StatusOr<HotRowsStatus> status) const;
  // For a successor's StartServing: the counts to carry over, remembered with the
  // successor's LateCounts so that ~HotRowCache adds there what is counted here after.
  absl::StatusOr<HotRowsStatus> HandOverCounts(std::shared_ptr<LateCounts> successor) const;
  // Re-installs `previous`'s hot sets (StartServing), the empty ones too with `empty`.
  void CarryHotSets(const HotRowCache& previous, bool empty);

  const std::string name_;
  const HotRowCacheOptions options_;
  const std::unique_ptr<HotRowManager> manager_;
  std::vector<Offset> offsets_;  // by table index; written only by StartServing
  const std::shared_ptr<LateCounts> late_ = std::make_shared<LateCounts>();
  mutable absl::Mutex handed_mu_;  // taken before late_->mu, which is taken before a successor's
  // The counts by table index when a successor last took them over, and its LateCounts;
  // null: never handed over.
  mutable std::vector<Offset> handed_over_ ABSL_GUARDED_BY(handed_mu_);
  mutable std::shared_ptr<LateCounts> successor_ ABSL_GUARDED_BY(handed_mu_);
  uint64_t carried_version_ = 0;  // the previous version's hot-row version last taken over

  mutable absl::Mutex rebuilder_mu_;
  bool serving_ ABSL_GUARDED_BY(rebuilder_mu_) = false;
  std::unique_ptr<PeriodicRebuilder> rebuilder_ ABSL_GUARDED_BY(rebuilder_mu_);
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_CACHE_H_
