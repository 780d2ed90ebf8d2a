#include "engine/hot_rows/hot_rows.h"

#include <cstring>
#include <new>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

void HotSet::AlignedDelete::operator()(std::byte* p) const { ::operator delete[](p, kAlignment); }

absl::StatusOr<std::shared_ptr<const HotSet>> HotSet::FromIds(const EmbeddingTable& table,
                                                              absl::Span<const int64_t> ids,
                                                              int capacity) {
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
  return sizeof(*this) + rows_.capacity() * sizeof(int32_t) + index_.MemoryBytes() +
         rows_.size() * compact_.row_bytes + qparams_.capacity() * sizeof(float);
}

}  // namespace fuserank::engine
