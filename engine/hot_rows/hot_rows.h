// Hot sets: per embedding table, a compact contiguous copy of up to `capacity` rows (the
// CPU engine's fast tier, and what a GPU backend uploads as its device cache) with a
// row -> slot index; and the snapshot of every table's hot set that a HotRowManager
// publishes. A HotSet holds bit-identical copies of the table's row bytes (and int8
// qparams), so reading a row through it never changes a score.
// Immutable after construction: share as std::shared_ptr<const ...>, read from any thread.
#ifndef FUSERANK_ENGINE_HOT_ROWS_HOT_ROWS_H_
#define FUSERANK_ENGINE_HOT_ROWS_HOT_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/hot_rows/hot_row_index.h"
#include "engine/model.h"

namespace fuserank::engine {

// SPEC section 3: a hot set given as `ids` ids, repeats and aliases included, may hold at
// most `capacity` of them; INVALID_ARGUMENT naming the table and both numbers otherwise.
// Checked before anything is mapped, allocated or fetched for the ids.
absl::Status CheckHotIdCount(const EmbeddingTable& table, size_t ids, int capacity);

class HotSet {
 public:
  // The hot set of `ids` (raw request ids) in `table`: each id is mapped to its row with
  // MapRow exactly as a request id is; ids that map to the same row collapse (the first
  // keeps its slot, so slot order is the order of first appearance: pass the hottest
  // first and slot 0 is the hottest). Errors (the message names the table):
  //   INVALID_ARGUMENT  an id out of range in an `oov: reject` table (names the id);
  //   INVALID_ARGUMENT  more ids than `capacity`, repeated or aliased ones included (SPEC
  //                     section 3; names both numbers).
  static absl::StatusOr<std::shared_ptr<const HotSet>> FromIds(const EmbeddingTable& table,
                                                               absl::Span<const int64_t> ids,
                                                               int capacity);
  // The same from rows already mapped (e.g. a frequency sketch's top N). Errors as above,
  // and INVALID_ARGUMENT for a row outside [0, table.rows).
  static absl::StatusOr<std::shared_ptr<const HotSet>> FromRows(const EmbeddingTable& table,
                                                                absl::Span<const int32_t> rows,
                                                                int capacity);
  // A set with no rows for `table`: every probe misses.
  static std::shared_ptr<const HotSet> Empty(const EmbeddingTable& table);
  // The hot set of a storage: redis table: `ids` (raw ids, distinct, hottest first) with
  // `values` fetched from the cluster (ids.size() x value_bytes, each as the cluster holds
  // it); ids with present[i] false (the cluster has no such key) are left out, so they are
  // looked up as any other key. INVALID_ARGUMENT for more ids than `capacity`.
  static absl::StatusOr<std::shared_ptr<const HotSet>> FromRemote(
      const EmbeddingTable& table, absl::Span<const int64_t> ids,
      absl::Span<const std::byte> values, size_t value_bytes, const std::vector<bool>& present,
      int capacity);

  // Hot path. The slot of `row` or -1 (cost: one hash and ~1.5 probes at load <= 0.5).
  int32_t FindSlot(int32_t row) const { return index_.Find(row); }
  // The bytes of `row` (table.row_bytes of them) in the compact copy, or nullptr.
  const std::byte* FindRow(int32_t row) const {
    const int32_t slot = index_.Find(row);
    return slot < 0 ? nullptr : slot_data(slot);
  }
  // Row bytes and (int8) qparams of a slot. REQUIRES: 0 <= slot < size().
  const std::byte* slot_data(int32_t slot) const {
    return compact_.data + static_cast<size_t>(slot) * compact_.row_bytes;
  }
  const float* slot_qparams(int32_t slot) const {
    return compact_.qparams == nullptr ? nullptr : compact_.qparams + 2 * slot;
  }

  // A storage: redis table's set: the slot of raw id `id`, or -1 (always -1 for a local
  // table's set, whose rows FindSlot looks up).
  int32_t FindId(int64_t id) const {
    const auto it = id_slot_.find(id);
    return it == id_slot_.end() ? -1 : it->second;
  }
  // A storage: redis table's set: ids()[slot] is the raw id held in `slot`.
  absl::Span<const int64_t> ids() const { return ids_; }

  int size() const { return static_cast<int>(remote_ ? ids_.size() : rows_.size()); }
  int table_index() const { return compact_.spec_index; }
  const std::string& table_name() const { return compact_.name; }
  // rows()[slot] is the table row held in `slot`.
  absl::Span<const int32_t> rows() const { return rows_; }
  const HotRowIndex& index() const { return index_; }
  // The compact copy viewed as a table of size() rows (slot = row), same dtype, dim and
  // row_bytes as the source; data is 64-byte aligned. Valid while this set lives. A
  // storage: redis table's set holds each value as the cluster does: row_bytes is the
  // value's size (an int8 row's codes, then its scale and bias) and qparams is null.
  const EmbeddingTable& compact_table() const { return compact_; }
  size_t MemoryBytes() const;

  HotSet(const HotSet&) = delete;
  HotSet& operator=(const HotSet&) = delete;

 private:
  struct AlignedDelete {
    void operator()(std::byte* p) const;
  };
  HotSet(const EmbeddingTable& table, std::vector<int32_t> rows);

  std::vector<int32_t> rows_;
  HotRowIndex index_;
  bool remote_ = false;
  std::vector<int64_t> ids_;                       // storage: redis: slot -> raw id
  absl::flat_hash_map<int64_t, int32_t> id_slot_;  // storage: redis: raw id -> slot
  std::unique_ptr<std::byte[], AlignedDelete> bytes_;
  std::vector<float> qparams_;
  EmbeddingTable compact_;
};

// Every table's hot set at one version. tables[i] is the set of the model's table i
// (spec order); never null (an empty set where none was installed).
struct HotRowSnapshot {
  uint64_t version = 0;
  std::vector<std::shared_ptr<const HotSet>> tables;

  const HotSet& table(int index) const { return *tables[index]; }
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_HOT_ROWS_HOT_ROWS_H_
