// HotRowManager: the hot-row sets of one loaded model, swapped live by read-copy-update,
// plus their hit/miss counters and per-table access-frequency sketches (cache.policy:
// frequency). Workers read the current HotRowSnapshot with one atomic shared_ptr load per
// batch (libstdc++ guards it with a short internal spin lock: ~10-35 ns measured with 1-4
// threads, bench/hot_rows_bench.cc) and keep it for the batch; Set/Rebuild build new sets on
// the caller's thread, then publish a new snapshot; batches still holding the old one
// finish on it, and it is freed when the last of them drops it.
// Thread-safe: every method may be called from any thread. Set and Rebuild are
// serialised among themselves; they never block readers (snapshot, version,
// RecordLookups). ObserveRows takes the table's sketch mutex (short: see below).
#ifndef FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_MANAGER_H_
#define FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/config_defaults.h"
#include "engine/hot_rows/frequency_sketch.h"
#include "engine/hot_rows/hot_rows.h"
#include "engine/model.h"

namespace fuserank::engine {

struct HotRowOptions {
  // cache.hot_rows_per_table: the most rows one table's hot set holds, 0 .. 2^29.
  int capacity = defaults::kHotRowsPerTable;
  // AccessSampler: about one row access in `sample_period` reaches the sketch (1: all).
  // 64 costs ~0.7 ns per id with one ObserveRows per table per batch (1: ~38 ns, 16:
  // ~2.6 ns; a dim-32 fp32 row read is ~17-45 ns): see bench/hot_rows_bench.cc.
  int sample_period = 64;
  // Whether each table gets an access-frequency sketch (cache.policy: frequency). Without
  // (the static policy) none is allocated, ObserveRows ignores its rows and Rebuild is
  // FAILED_PRECONDITION. With, capacity must be at most kMaxSketchedCapacity.
  bool sketches = true;
  // Per-table sketch size; unset: FrequencySketch::OptionsForCapacity(capacity).
  std::optional<FrequencySketch::Options> sketch;
  // Version of the initial (empty) snapshot. A model reload that replaces the manager
  // passes the old manager's version() so the exported version never goes back.
  uint64_t initial_version = 0;
};

// One table's state, as in fuserank.v1.TableHotRowsStatus.
struct TableHotRowsStatus {
  std::string table;
  uint32_t hot_rows = 0;  // rows in the hot set now
  uint32_t capacity = 0;  // HotRowOptions::capacity
  uint64_t hits = 0;      // RecordLookups totals since the manager was created
  uint64_t misses = 0;
};

// As fuserank.v1.HotRowsStatus: the version after the call, and the tables it named.
struct HotRowsStatus {
  uint64_t version = 0;
  std::vector<TableHotRowsStatus> tables;
};

// One table of a Set call: raw request ids (views; they need to live only for the call).
struct TableIds {
  std::string_view table;
  absl::Span<const int64_t> ids;
};

// Where the hot sets of storage: redis tables get their values (the model's RemoteTier):
// FetchRows fills values (ids.size() x ValueBytes(table), each as the cluster holds it)
// and present (false: the cluster has no such key) for raw `ids` of table index `table`,
// or fails (UNAVAILABLE naming the table) when any of them could not be fetched.
class RemoteRowSource {
 public:
  virtual ~RemoteRowSource() = default;
  virtual size_t ValueBytes(int table) const = 0;
  virtual absl::Status FetchRows(int table, absl::Span<const int64_t> ids,
                                 std::vector<std::byte>* values, std::vector<bool>* present) = 0;
};

class HotRowManager {
 public:
  // Starts at options.initial_version with an empty hot set for every table of `model`.
  // INVALID_ARGUMENT for options out of range (the message names the field).
  static absl::StatusOr<std::unique_ptr<HotRowManager>> Create(std::shared_ptr<const Model> model,
                                                               const HotRowOptions& options);

  // --- Serving path ---------------------------------------------------------------
  // The current snapshot; hold it for a whole batch (it stays valid and unchanged).
  // snapshot()->table(t).FindSlot(row) >= 0 is a hit for table index t (spec order).
  std::shared_ptr<const HotRowSnapshot> snapshot() const {
    return current_.load(std::memory_order_acquire);
  }
  // The current snapshot's version (one atomic load: cheap to poll for "changed?", e.g. a
  // worker that keeps its snapshot across batches and re-acquires when this moves).
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // Adds a batch's lookups of table index `table` (relaxed atomics: call once per batch
  // per table, or whenever a GPU's device counters are read back, with the deltas).
  // REQUIRES: 0 <= table < model().tables().size().
  void RecordLookups(int table, uint64_t hits, uint64_t misses) {
    if (hits != 0) counters_[table].hits.fetch_add(hits, std::memory_order_relaxed);
    if (misses != 0) counters_[table].misses.fetch_add(misses, std::memory_order_relaxed);
  }
  // Counts accesses of `rows` in table `table`'s sketch (every row given is counted:
  // sample first, e.g. with AccessSampler, which calls this once per table per batch).
  // Takes the table's sketch mutex for ~30 ns per row; Rebuild holds it for the table's
  // TopN and Decay (~1 ms at capacity 4096). REQUIRES: 0 <= table < tables().size().
  void ObserveRows(int table, absl::Span<const int32_t> rows);
  // The same for a storage: redis table's raw ids (sampled while its keys are staged,
  // RemoteTier::Stage); ignored for a local table, as ObserveRows is for a redis one.
  void ObserveIds(int table, absl::Span<const int64_t> ids);

  // --- Admin (fuserank.v1.Admin) ----------------------------------------------------
  // The source of storage: redis tables' hot rows; null (the default): Set with ids for
  // such a table is FAILED_PRECONDITION. Set it before the manager is shared; it must
  // outlive the manager's last Set.
  void SetRemoteRows(RemoteRowSource* source) { remote_rows_ = source; }

  // Replaces the hot set of every listed table with `ids` (HotSet::FromIds; for a
  // storage: redis table the distinct ids' values are fetched from the cluster first,
  // HotSet::FromRemote); other tables keep theirs. All or nothing: on any error nothing
  // changes. Errors (besides the fetch's UNAVAILABLE):
  //   NOT_FOUND         a table the model does not have (lists the model's tables; the
  //                     caller adds which model, by the name it is served under);
  //   INVALID_ARGUMENT  a table listed twice; more ids than capacity (repeats and ids
  //                     that map to one row included: SPEC section 3); an out-of-range
  //                     id in an oov: reject table.
  // Success publishes one new snapshot (version + 1) and returns the listed tables'
  // status; an empty list changes nothing and returns the current version.
  // The status lists the tables in call order. Example:
  //   manager.Set({{"item_id", ids_span}, {"user_id", {1, 2, 3}}});
  absl::StatusOr<HotRowsStatus> Set(absl::Span<const TableIds> tables);
  // Publishes the current sets again as version `version` when that is above the current
  // one (a new version of the model takes over the hot-row version of the one it replaces,
  // which never goes back); nothing otherwise.
  void RaiseVersion(uint64_t version);
  // Status of the listed tables (all, in spec order, when empty). NOT_FOUND as Set.
  absl::StatusOr<HotRowsStatus> Get(absl::Span<const std::string> tables) const;
  // Installs, for each listed table (all when empty), the top `capacity` rows of its
  // sketch (hottest in slot 0), as one swap (version + 1), then halves the table's
  // counts (Decay), so rows that stopped appearing fade over a few rebuilds. A storage:
  // redis table gets its most often sampled ids, fetched from the cluster (RemoteSet): a
  // failed fetch fails the call when the table is named, and leaves that table's set as
  // it is (logged) when all tables are rebuilt.
  absl::StatusOr<HotRowsStatus> Rebuild(absl::Span<const std::string> tables);

  const Model& model() const { return *model_; }
  const HotRowOptions& options() const { return options_; }
  // Bytes held by the frequency sketches (0 without HotRowOptions::sketches); fixed.
  size_t SketchMemoryBytes() const;
  // Position of table `name` in the model (spec order), or -1.
  int TableIndex(std::string_view name) const { return model_->FindTable(name); }

 private:
  struct alignas(64) Counters {
    std::atomic<uint64_t> hits{0};
    std::atomic<uint64_t> misses{0};
  };
  // One of rows (a local table) and ids (a storage: redis table) is set.
  struct TableSketch {
    TableSketch(const FrequencySketch::Options& o, bool remote) {
      absl::MutexLock lock(&mu);
      if (remote) {
        ids = std::make_unique<IdFrequencySketch>(o);
      } else {
        rows = std::make_unique<FrequencySketch>(o);
      }
    }
    absl::Mutex mu;
    std::unique_ptr<FrequencySketch> rows ABSL_GUARDED_BY(mu);
    std::unique_ptr<IdFrequencySketch> ids ABSL_GUARDED_BY(mu);
  };

  HotRowManager(std::shared_ptr<const Model> model, const HotRowOptions& options);
  // Table indices of `names` (all when empty); NOT_FOUND / INVALID_ARGUMENT as Set.
  absl::StatusOr<std::vector<int>> Resolve(absl::Span<const std::string_view> names) const;
  // Publishes a snapshot with sets[i] for table indices[i]. REQUIRES: write_mu_ held.
  void Publish(absl::Span<const int> indices, std::vector<std::shared_ptr<const HotSet>> sets)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  HotRowsStatus StatusOf(const HotRowSnapshot& snapshot, absl::Span<const int> indices) const;
  // The hot set of storage: redis table `index` for raw `ids`, fetched from remote_rows_.
  absl::StatusOr<std::shared_ptr<const HotSet>> RemoteSet(int index,
                                                          absl::Span<const int64_t> ids) const;

  const std::shared_ptr<const Model> model_;
  const HotRowOptions options_;
  absl::Mutex write_mu_;  // serialises Set / Rebuild
  std::atomic<std::shared_ptr<const HotRowSnapshot>> current_;
  std::atomic<uint64_t> version_{0};
  std::unique_ptr<Counters[]> counters_;
  std::vector<std::unique_ptr<TableSketch>> sketches_;
  RemoteRowSource* remote_rows_ = nullptr;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_MANAGER_H_
