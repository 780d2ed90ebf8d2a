#include "engine/hot_rows/hot_row_manager.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/escape_text.h"
#include "engine/status_macros.h"
#include "spdlog/spdlog.h"

namespace fuserank::engine {
namespace {

constexpr int kMaxCapacity = 1 << 29;

absl::Status CheckOptions(const HotRowOptions& options) {
  if (options.capacity < 0 || options.capacity > kMaxCapacity) {
    return absl::InvalidArgumentError(absl::StrCat("cache.hot_rows_per_table must be in [0, ",
                                                   kMaxCapacity, "], got ", options.capacity));
  }
  if (options.sketches && !options.sketch.has_value() && options.capacity > kMaxSketchedCapacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache.hot_rows_per_table must be at most ", kMaxSketchedCapacity,
        " with cache.policy: frequency (its per-table frequency sketch is sized from it), got ",
        options.capacity));
  }
  if (options.sample_period < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("hot-row sample_period must be >= 1, got ", options.sample_period));
  }
  if (options.sketch.has_value()) {
    const FrequencySketch::Options& s = *options.sketch;
    if (s.width < 1 || s.width > (1 << 30) || s.depth < 1 || s.depth > 8 || s.candidates < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "frequency sketch options out of range: width ", s.width, " (1..2^30), depth ", s.depth,
          " (1..8), candidates ", s.candidates, " (>= 1)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HotRowManager>> HotRowManager::Create(
    std::shared_ptr<const Model> model, const HotRowOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("HotRowManager needs a model");
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  return std::unique_ptr<HotRowManager>(new HotRowManager(std::move(model), options));
}

HotRowManager::HotRowManager(std::shared_ptr<const Model> model, const HotRowOptions& options)
    : model_(std::move(model)), options_(options) {
  const auto& tables = model_->tables();
  auto initial = std::make_shared<HotRowSnapshot>();
  const FrequencySketch::Options sketch_options =
      options_.sketches
          ? options_.sketch.value_or(FrequencySketch::OptionsForCapacity(options_.capacity))
          : FrequencySketch::Options{};
  for (const EmbeddingTable& table : tables) {
    initial->tables.push_back(HotSet::Empty(table));
    if (options_.sketches) {
      sketches_.push_back(std::make_unique<TableSketch>(sketch_options, table.remote));
    }
  }
  counters_ = std::make_unique<Counters[]>(tables.size());
  initial->version = options_.initial_version;
  version_.store(options_.initial_version, std::memory_order_release);
  current_.store(std::move(initial), std::memory_order_release);
}

size_t HotRowManager::SketchMemoryBytes() const {
  size_t bytes = 0;
  for (const auto& s : sketches_) {
    absl::MutexLock lock(&s->mu);
    bytes += s->rows != nullptr ? s->rows->MemoryBytes() : s->ids->MemoryBytes();
  }
  return bytes;
}

void HotRowManager::ObserveRows(int table, absl::Span<const int32_t> rows) {
  if (rows.empty() || sketches_.empty()) return;
  TableSketch& s = *sketches_[table];
  absl::MutexLock lock(&s.mu);
  if (s.rows == nullptr) return;  // a storage: redis table: ObserveIds
  for (const int32_t row : rows) s.rows->Observe(row);
}

void HotRowManager::ObserveIds(int table, absl::Span<const int64_t> ids) {
  if (ids.empty() || sketches_.empty()) return;
  TableSketch& s = *sketches_[table];
  absl::MutexLock lock(&s.mu);
  if (s.ids == nullptr) return;  // a local table: ObserveRows
  for (const int64_t id : ids) s.ids->Observe(id);
}

absl::StatusOr<std::vector<int>> HotRowManager::Resolve(
    absl::Span<const std::string_view> names) const {
  std::vector<int> indices;
  if (names.empty()) {
    for (size_t i = 0; i < model_->tables().size(); ++i) indices.push_back(static_cast<int>(i));
    return indices;
  }
  absl::flat_hash_set<int> seen;
  for (const std::string_view name : names) {
    const int index = model_->FindTable(name);
    if (index < 0) {
      std::vector<std::string> available;
      for (const EmbeddingTable& t : model_->tables()) available.push_back(t.name);
      // The caller names the model: the server serves it under a name of its own.
      return absl::NotFoundError(
          absl::StrCat("no table '", EscapeText(absl::string_view(name.data(), name.size())),
                       "'; its tables: ", absl::StrJoin(available, ", ")));
    }
    if (!seen.insert(index).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table '", EscapeText(absl::string_view(name.data(), name.size())), "' is listed twice"));
    }
    indices.push_back(index);
  }
  return indices;
}

void HotRowManager::Publish(absl::Span<const int> indices,
                            std::vector<std::shared_ptr<const HotSet>> sets) {
  const std::shared_ptr<const HotRowSnapshot> current = snapshot();
  auto next = std::make_shared<HotRowSnapshot>(*current);  // shares the unchanged sets
  for (size_t i = 0; i < indices.size(); ++i) next->tables[indices[i]] = std::move(sets[i]);
  next->version = current->version + 1;
  const uint64_t version = next->version;
  current_.store(std::move(next), std::memory_order_release);
  version_.store(version, std::memory_order_release);
}

HotRowsStatus HotRowManager::StatusOf(const HotRowSnapshot& snapshot,
                                      absl::Span<const int> indices) const {
  HotRowsStatus status;
  status.version = snapshot.version;
  for (const int i : indices) {
    TableHotRowsStatus& t = status.tables.emplace_back();
    t.table = model_->tables()[i].name;
    t.hot_rows = static_cast<uint32_t>(snapshot.table(i).size());
    t.capacity = static_cast<uint32_t>(options_.capacity);
    t.hits = counters_[i].hits.load(std::memory_order_relaxed);
    t.misses = counters_[i].misses.load(std::memory_order_relaxed);
  }
  return status;
}

absl::StatusOr<std::shared_ptr<const HotSet>> HotRowManager::RemoteSet(
    int index, absl::Span<const int64_t> ids) const {
  const EmbeddingTable& table = model_->tables()[index];
  if (ids.empty()) return HotSet::Empty(table);
  RETURN_IF_ERROR(CheckHotIdCount(table, ids.size(), options_.capacity));  // before any fetch
  std::vector<int64_t> distinct;
  distinct.reserve(ids.size());
  absl::flat_hash_set<int64_t> seen;
  seen.reserve(ids.size());
  for (const int64_t id : ids) {
    if (seen.insert(id).second) distinct.push_back(id);
  }
  if (remote_rows_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("table '", table.name, "' is storage: redis and no cluster is connected"));
  }
  std::vector<std::byte> values;
  std::vector<bool> present;
  RETURN_IF_ERROR(remote_rows_->FetchRows(index, distinct, &values, &present));
  return HotSet::FromRemote(table, distinct, values, remote_rows_->ValueBytes(index), present,
                            options_.capacity);
}

absl::StatusOr<HotRowsStatus> HotRowManager::Set(absl::Span<const TableIds> tables) {
  absl::MutexLock lock(&write_mu_);
  std::vector<std::string_view> names;
  for (const TableIds& t : tables) names.push_back(t.table);
  if (names.empty()) return StatusOf(*snapshot(), {});
  absl::StatusOr<std::vector<int>> indices = Resolve(names);
  if (!indices.ok()) return indices.status();
  std::vector<std::shared_ptr<const HotSet>> sets;
  for (size_t i = 0; i < tables.size(); ++i) {
    const EmbeddingTable& table = model_->tables()[(*indices)[i]];
    if (table.remote) {
      absl::StatusOr<std::shared_ptr<const HotSet>> set = RemoteSet((*indices)[i], tables[i].ids);
      if (!set.ok()) return set.status();
      sets.push_back(*std::move(set));
      continue;
    }
    absl::StatusOr<std::shared_ptr<const HotSet>> set =
        HotSet::FromIds(model_->tables()[(*indices)[i]], tables[i].ids, options_.capacity);
    if (!set.ok()) return set.status();
    sets.push_back(*std::move(set));
  }
  Publish(*indices, std::move(sets));
  return StatusOf(*snapshot(), *indices);
}

void HotRowManager::RaiseVersion(uint64_t version) {
  absl::MutexLock lock(&write_mu_);
  const std::shared_ptr<const HotRowSnapshot> current = snapshot();
  if (version <= current->version) return;
  auto next = std::make_shared<HotRowSnapshot>(*current);  // shares every set
  next->version = version;
  current_.store(std::move(next), std::memory_order_release);
  version_.store(version, std::memory_order_release);
}

absl::StatusOr<HotRowsStatus> HotRowManager::Get(absl::Span<const std::string> tables) const {
  const std::vector<std::string_view> names(tables.begin(), tables.end());
  absl::StatusOr<std::vector<int>> indices = Resolve(names);
  if (!indices.ok()) return indices.status();
  return StatusOf(*snapshot(), *indices);
}

absl::StatusOr<HotRowsStatus> HotRowManager::Rebuild(absl::Span<const std::string> tables) {
  if (!options_.sketches) {
    return absl::FailedPreconditionError(
        "no access frequencies are observed (cache.policy is static): nothing to rebuild from");
  }
  absl::MutexLock lock(&write_mu_);
  const std::vector<std::string_view> names(tables.begin(), tables.end());
  absl::StatusOr<std::vector<int>> indices = Resolve(names);
  if (!indices.ok()) return indices.status();
  std::vector<int> rebuilt;
  std::vector<std::shared_ptr<const HotSet>> sets;
  for (const int index : *indices) {
    const EmbeddingTable& table = model_->tables()[index];
    TableSketch& s = *sketches_[index];
    if (table.remote) {  // the most often sampled ids, fetched from the cluster
      std::vector<std::pair<int64_t, uint32_t>> top;
      {
        absl::MutexLock sketch_lock(&s.mu);
        top = s.ids->TopN(options_.capacity);
      }
      std::vector<int64_t> ids;
      ids.reserve(top.size());
      for (const auto& [id, count] : top) ids.push_back(id);
      absl::StatusOr<std::shared_ptr<const HotSet>> set = RemoteSet(index, ids);
      if (!set.ok()) {
        // Named: the call fails; all tables: this one keeps its set, the others go on.
        if (!names.empty()) return set.status();
        spdlog::warn("model '{}': hot rows of '{}' not rebuilt: {}", model_->spec().name,
                     table.name, std::string(set.status().message()));
        continue;
      }
      rebuilt.push_back(index);
      sets.push_back(*std::move(set));
      continue;
    }
    std::vector<std::pair<int32_t, uint32_t>> top;
    {
      absl::MutexLock sketch_lock(&s.mu);
      top = s.rows->TopN(options_.capacity);
    }
    std::vector<int32_t> rows;
    rows.reserve(top.size());
    for (const auto& [row, count] : top) {
      if (row >= 0 && row < table.rows) rows.push_back(row);  // ObserveRows trusts callers
    }
    absl::StatusOr<std::shared_ptr<const HotSet>> set =
        HotSet::FromRows(table, rows, options_.capacity);
    if (!set.ok()) return set.status();
    rebuilt.push_back(index);
    sets.push_back(*std::move(set));
  }
  if (rebuilt.empty()) return StatusOf(*snapshot(), *indices);
  Publish(rebuilt, std::move(sets));
  for (const int index : rebuilt) {
    TableSketch& s = *sketches_[index];
    absl::MutexLock sketch_lock(&s.mu);
    if (s.rows != nullptr) s.rows->Decay();
    if (s.ids != nullptr) s.ids->Decay();
  }
  return StatusOf(*snapshot(), *indices);
}

}  // namespace fuserank::engine
