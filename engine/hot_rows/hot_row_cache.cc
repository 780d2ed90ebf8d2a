#include "engine/hot_rows/hot_row_cache.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace fuserank::engine {

absl::StatusOr<std::unique_ptr<HotRowCache>> HotRowCache::Create(std::string name,
                                                                 std::shared_ptr<const Model> model,
                                                                 const HotRowCacheOptions& options,
                                                                 const HotRowCache* previous) {
  if (options.frequency && options.rebuild_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache.rebuild_interval_seconds must be > 0, got ",
                     absl::FormatDuration(options.rebuild_interval)));
  }
  HotRowOptions manager_options;
  manager_options.capacity = options.capacity;
  manager_options.sketches = options.frequency;  // the static policy observes nothing
  manager_options.initial_version = previous == nullptr ? 0 : previous->version();
  absl::StatusOr<std::unique_ptr<HotRowManager>> manager =
      HotRowManager::Create(std::move(model), manager_options);
  if (!manager.ok()) return manager.status();
  return std::unique_ptr<HotRowCache>(
      new HotRowCache(std::move(name), options, std::move(*manager)));
}

HotRowCache::HotRowCache(std::string name, const HotRowCacheOptions& options,
                         std::unique_ptr<HotRowManager> manager)
    : name_(std::move(name)),
      options_(options),
      manager_(std::move(manager)),
      offsets_(manager_->model().tables().size()) {}

void HotRowCache::LateCounts::Add(const std::string& table, Offset counts) {
  std::shared_ptr<LateCounts> next;
  {
    absl::MutexLock lock(&mu);
    if (forward == nullptr) {
      Offset& late = by_table[table];
      late.hits += counts.hits;
      late.misses += counts.misses;
      return;
    }
    next = forward;
  }
  next->Add(table, counts);
}

HotRowCache::~HotRowCache() {
  PauseRebuilds();
  // A retired version is destroyed once the last request on it has let go: what those
  // requests counted after the hand-over goes to the successor, and so does whatever the
  // versions before this one still add to late_ from now on.
  absl::MutexLock handed(&handed_mu_);
  if (successor_ == nullptr) return;
  absl::MutexLock lock(&late_->mu);
  absl::StatusOr<HotRowsStatus> now = WithCounts(manager_->Get({}), late_->by_table);
  if (now.ok()) {
    for (size_t i = 0; i < now->tables.size() && i < handed_over_.size(); ++i) {
      const TableHotRowsStatus& t = now->tables[i];
      successor_->Add(t.table, {t.hits - handed_over_[i].hits, t.misses - handed_over_[i].misses});
    }
  }
  late_->forward = successor_;
}

absl::StatusOr<HotRowsStatus> HotRowCache::HandOverCounts(
    std::shared_ptr<LateCounts> successor) const {
  absl::MutexLock handed(&handed_mu_);
  absl::MutexLock lock(&late_->mu);
  absl::StatusOr<HotRowsStatus> counts = WithCounts(manager_->Get({}), late_->by_table);
  if (!counts.ok()) return counts;
  handed_over_.clear();
  for (const TableHotRowsStatus& t : counts->tables) handed_over_.push_back({t.hits, t.misses});
  successor_ = std::move(successor);
  return counts;
}

void HotRowCache::StartServing(const HotRowCache* previous) {
  // The warm-up's lookups are not traffic: start the counts from here.
  absl::StatusOr<HotRowsStatus> raw = manager_->Get({});
  absl::flat_hash_map<std::string, TableHotRowsStatus> carried;
  if (previous != nullptr) {
    absl::StatusOr<HotRowsStatus> before = previous->HandOverCounts(late_);
    if (before.ok()) {
      for (TableHotRowsStatus& t : before->tables) carried[t.table] = std::move(t);
    }
  }
  if (raw.ok()) {
    for (size_t i = 0; i < raw->tables.size(); ++i) {
      const TableHotRowsStatus& t = raw->tables[i];
      auto it = carried.find(t.table);
      const uint64_t hits = it == carried.end() ? 0 : it->second.hits;
      const uint64_t misses = it == carried.end() ? 0 : it->second.misses;
      offsets_[i] = Offset{hits - t.hits, misses - t.misses};  // mod 2^64
    }
  }
  if (previous != nullptr) {
    // Changes may have landed on `previous` since Create read its version: continue from
    // where it is now, so the carried sets swap in above it and the version never goes back.
    carried_version_ = previous->version();
    manager_->RaiseVersion(carried_version_);
    CarryHotSets(*previous, /*empty=*/false);
  }
  {
    absl::MutexLock lock(&rebuilder_mu_);
    serving_ = true;
  }
  ResumeRebuilds();
}

void HotRowCache::CatchUp(const HotRowCache& previous) {
  if (previous.version() == carried_version_) return;
  carried_version_ = previous.version();
  manager_->RaiseVersion(previous.version());
  CarryHotSets(previous, /*empty=*/true);
}

void HotRowCache::CarryHotSets(const HotRowCache& previous, bool empty) {
  const std::shared_ptr<const engine::HotRowSnapshot> old = previous.manager_->snapshot();
  const Model& old_model = previous.manager_->model();
  std::vector<std::vector<int64_t>> ids;  // row r is id r: it maps to itself (SPEC 2.1)
  std::vector<std::string> carried, dropped;
  ids.reserve(manager_->model().tables().size());
  std::vector<TableIds> tables;
  for (const engine::EmbeddingTable& table : manager_->model().tables()) {
    const int index = old_model.FindTable(table.name);
    if (index < 0) continue;
    const engine::HotSet& set = old->table(index);
    if (set.size() == 0 && !empty) continue;
    if (old_model.tables()[index].rows != table.rows) {
      dropped.push_back(absl::StrCat(table.name, " (", old_model.tables()[index].rows, " -> ",
                                     table.rows, " rows)"));
      continue;
    }
    if (table.remote) {  // raw ids, fetched again from the cluster by Set
      ids.emplace_back(set.ids().begin(), set.ids().end());
    } else {
      ids.emplace_back(set.rows().begin(), set.rows().end());
    }
    tables.push_back({table.name, ids.back()});
    carried.push_back(absl::StrCat(table.name, " (", set.size(), " rows)"));
  }
  if (!dropped.empty()) {
    spdlog::info(
        "model '{}': the hot sets of {} are not carried over to the new version: the "
        "row count changed; they start empty",
        name_, absl::StrJoin(dropped, ", "));
  }
  if (tables.empty()) return;
  absl::StatusOr<HotRowsStatus> set = manager_->Set(tables);
  if (!set.ok() && set.status().code() == absl::StatusCode::kUnavailable) {
    // A storage: redis table's ids could not be fetched: the local tables' sets are still
    // carried, the redis tables start empty.
    spdlog::warn("model '{}': {}; its storage: redis tables start with empty hot sets", name_,
                 std::string(set.status().message()));
    std::vector<TableIds> local;
    std::vector<std::string> carried_local;
    for (size_t i = 0; i < tables.size(); ++i) {
      if (manager_->model().tables()[manager_->TableIndex(tables[i].table)].remote) continue;
      local.push_back(tables[i]);
      carried_local.push_back(carried[i]);
    }
    carried = std::move(carried_local);
    if (local.empty()) return;
    set = manager_->Set(local);
  }
  if (!set.ok()) {
    spdlog::warn(
        "model '{}': the hot sets of the previous version are not carried over, the "
        "new version starts with empty ones: {}",
        name_, std::string(set.status().message()));
    return;
  }
  spdlog::info("model '{}': hot sets of {} carried over to the new version; hot-row version {}",
               name_, absl::StrJoin(carried, ", "), set->version);
}

absl::StatusOr<HotRowsStatus> HotRowCache::Adjusted(absl::StatusOr<HotRowsStatus> status) const {
  absl::MutexLock lock(&late_->mu);
  return WithCounts(std::move(status), late_->by_table);
}

absl::StatusOr<HotRowsStatus> HotRowCache::WithCounts(
    absl::StatusOr<HotRowsStatus> status,
    const absl::flat_hash_map<std::string, Offset>& late) const {
  if (!status.ok()) return status;
  for (TableHotRowsStatus& t : status->tables) {
    const int index = manager_->TableIndex(t.table);
    if (index < 0) continue;
    t.hits += offsets_[index].hits;
    t.misses += offsets_[index].misses;
    if (const auto it = late.find(t.table); it != late.end()) {
      t.hits += it->second.hits;
      t.misses += it->second.misses;
    }
  }
  return status;
}

absl::StatusOr<HotRowsStatus> HotRowCache::Set(absl::Span<const TableIds> tables) {
  return Adjusted(manager_->Set(tables));
}

absl::StatusOr<HotRowsStatus> HotRowCache::Get(absl::Span<const std::string> tables) const {
  return Adjusted(manager_->Get(tables));
}

absl::StatusOr<HotRowsStatus> HotRowCache::Rebuild(absl::Span<const std::string> tables) {
  return Adjusted(manager_->Rebuild(tables));
}

void HotRowCache::PauseRebuilds() {
  absl::MutexLock lock(&rebuilder_mu_);
  if (rebuilder_ == nullptr) return;
  rebuilder_->Stop();  // the callback below does not take rebuilder_mu_
  rebuilder_.reset();
}

void HotRowCache::ResumeRebuilds() {
  absl::MutexLock lock(&rebuilder_mu_);
  if (!options_.frequency || !serving_ || rebuilder_ != nullptr) return;
  rebuilder_ = std::make_unique<PeriodicRebuilder>(
      manager_.get(), options_.rebuild_interval,
      [name = name_](const absl::StatusOr<HotRowsStatus>& status) {
        if (!status.ok()) {
          spdlog::warn("model '{}': periodic hot-row rebuild failed: {}", name,
                       std::string(status.status().message()));
          return;
        }
        std::vector<std::string> sizes;
        for (const TableHotRowsStatus& t : status->tables) {
          sizes.push_back(absl::StrCat(t.table, " ", t.hot_rows));
        }
        spdlog::debug("model '{}': hot rows rebuilt from access frequencies ({}); version {}", name,
                      absl::StrJoin(sizes, ", "), status->version);
      });
}

bool HotRowCache::rebuilds_running() const {
  absl::MutexLock lock(&rebuilder_mu_);
  return rebuilder_ != nullptr;
}

}  // namespace fuserank::engine
