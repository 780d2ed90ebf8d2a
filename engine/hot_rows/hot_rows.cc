#include "engine/hot_rows/hot_rows.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"

namespace fuserank::engine {
namespace {

constexpr std::align_val_t kAlignment{64};

absl::Status CheckCapacity(const EmbeddingTable& table, size_t distinct, size_t given,
                           int capacity) {
  if (distinct <= static_cast<size_t>(capacity)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "table '", table.name, "': ", given, " ids map to ", distinct,
      " distinct rows, more than the hot-set capacity ", capacity, " (cache.hot_rows_per_table)"));
}

}  // namespace

absl::Status CheckHotIdCount(const EmbeddingTable& table, size_t ids, int capacity) {
  if (ids <= static_cast<size_t>(std::max(capacity, 0))) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("table '", table.name, "': ", ids, " ids, more than the hot-set capacity ",
                   capacity, " (cache.hot_rows_per_table); send at most that many, each id once"));
}

void HotSet::AlignedDelete::operator()(std::byte* p) const { ::operator delete[](p, kAlignment); }

absl::StatusOr<std::shared_ptr<const HotSet>> HotSet::FromIds(const EmbeddingTable& table,
                                                              absl::Span<const int64_t> ids,
                                                              int capacity) {
  RETURN_IF_ERROR(CheckHotIdCount(table, ids.size(), capacity));
  std::vector<int32_t> rows;
  rows.reserve(ids.size());
  absl::flat_hash_set<int32_t> seen;
  seen.reserve(ids.size());
  for (const int64_t id : ids) {
    int32_t row = 0;
    if (!MapRow(id, table.rows, table.oov, &row)) {
      return absl::InvalidArgumentError(absl::StrCat("table '", table.name, "': id ", id,
                                                     " is out of range [0, ", table.rows,
                                                     ") and the table has oov: reject"));
    }
    if (seen.insert(row).second) rows.push_back(row);
  }
  if (absl::Status s = CheckCapacity(table, rows.size(), ids.size(), capacity); !s.ok()) return s;
  return std::shared_ptr<const HotSet>(new HotSet(table, std::move(rows)));
}

absl::StatusOr<std::shared_ptr<const HotSet>> HotSet::FromRows(const EmbeddingTable& table,
                                                               absl::Span<const int32_t> rows,
                                                               int capacity) {
  std::vector<int32_t> unique;
  unique.reserve(rows.size());
  absl::flat_hash_set<int32_t> seen;
  seen.reserve(rows.size());
  for (const int32_t row : rows) {
    if (row < 0 || row >= table.rows) {
      return absl::InvalidArgumentError(absl::StrCat("table '", table.name, "': row ", row,
                                                     " is out of range [0, ", table.rows, ")"));
    }
    if (seen.insert(row).second) unique.push_back(row);
  }
  if (absl::Status s = CheckCapacity(table, unique.size(), rows.size(), capacity); !s.ok()) {
    return s;
  }
  return std::shared_ptr<const HotSet>(new HotSet(table, std::move(unique)));
}

std::shared_ptr<const HotSet> HotSet::Empty(const EmbeddingTable& table) {
  return std::shared_ptr<const HotSet>(new HotSet(table, {}));
}

absl::StatusOr<std::shared_ptr<const HotSet>> HotSet::FromRemote(
    const EmbeddingTable& table, absl::Span<const int64_t> ids, absl::Span<const std::byte> values,
    size_t value_bytes, const std::vector<bool>& present, int capacity) {
  if (absl::Status s = CheckCapacity(table, ids.size(), ids.size(), capacity); !s.ok()) return s;
  if (values.size() != ids.size() * value_bytes || present.size() != ids.size()) {
    return absl::InternalError(absl::StrCat("table '", table.name, "': ", values.size(),
                                            " value bytes for ", ids.size(), " ids"));
  }
  std::shared_ptr<HotSet> set(new HotSet(table, {}));
  set->remote_ = true;
  size_t held = 0;
  for (size_t i = 0; i < ids.size(); ++i) held += present[i] ? 1 : 0;
  if (held > 0 && value_bytes > 0)
    set->bytes_.reset(new (kAlignment) std::byte[held * value_bytes]);
  set->ids_.reserve(held);
  set->id_slot_.reserve(held);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!present[i]) continue;
    const auto [it, added] =
        set->id_slot_.try_emplace(ids[i], static_cast<int32_t>(set->ids_.size()));
    if (!added) {
      return absl::InternalError(absl::StrCat("table '", table.name, "': id ", ids[i], " twice"));
    }
    std::memcpy(set->bytes_.get() + set->ids_.size() * value_bytes, values.data() + i * value_bytes,
                value_bytes);
    set->ids_.push_back(ids[i]);
  }
  set->compact_.rows = static_cast<int64_t>(held);
  set->compact_.data = set->bytes_.get();
  set->compact_.row_bytes = value_bytes;
  set->compact_.qparams = nullptr;
  return std::shared_ptr<const HotSet>(std::move(set));
}

HotSet::HotSet(const EmbeddingTable& table, std::vector<int32_t> rows)
    : rows_(std::move(rows)), index_(rows_), compact_(table) {
  const size_t row_bytes = table.row_bytes;
  if (!rows_.empty() && row_bytes > 0) {
    bytes_.reset(new (kAlignment) std::byte[rows_.size() * row_bytes]);
    for (size_t slot = 0; slot < rows_.size(); ++slot) {
      std::memcpy(bytes_.get() + slot * row_bytes,
                  table.data + static_cast<size_t>(rows_[slot]) * row_bytes, row_bytes);
    }
  }
  if (table.qparams != nullptr) {
    qparams_.resize(2 * rows_.size());
    for (size_t slot = 0; slot < rows_.size(); ++slot) {
      qparams_[2 * slot] = table.qparams[2 * static_cast<size_t>(rows_[slot])];
      qparams_[2 * slot + 1] = table.qparams[2 * static_cast<size_t>(rows_[slot]) + 1];
    }
  }
  compact_.rows = static_cast<int64_t>(rows_.size());
  compact_.data = bytes_.get();
  compact_.qparams = table.qparams == nullptr ? nullptr : qparams_.data();
}

size_t HotSet::MemoryBytes() const {
  // The id index: a slot (an id and a slot number) and a control byte per entry.
  const size_t id_index = id_slot_.capacity() * (sizeof(std::pair<const int64_t, int32_t>) + 1);
  return sizeof(*this) + rows_.capacity() * sizeof(int32_t) + index_.MemoryBytes() +
         static_cast<size_t>(size()) * compact_.row_bytes + qparams_.capacity() * sizeof(float) +
         ids_.capacity() * sizeof(int64_t) + id_index;
}

}  // namespace fuserank::engine
