// One worker's staging of a batch's storage: redis rows (RemoteTier::Stage fills it): per
// remote table a compact table of the batch's distinct keys, and the batch's row arrays
// with those tables' entries pointing into it; the reused buffers of the fetch. The forward
// pass reads the staged tables exactly as it reads a local one, so scores are bit-identical
// to the same table served locally. Belongs to one worker; reused from batch to batch.
#ifndef FUSERANK_ENGINE_REMOTE_STAGE_H_
#define FUSERANK_ENGINE_REMOTE_STAGE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "engine/model.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote_tier.h"

namespace fuserank::engine {

class RemoteStage {
 public:
  // The rows the forward pass reads for the batch's user / item bags.
  const int32_t* user_rows() const { return user_rows_.data(); }
  const int32_t* item_rows() const { return item_rows_.data(); }
  // Table t's staged copy (rows: the batch's distinct keys), or null for a local table.
  const EmbeddingTable* staged(int t) const { return tables_[t].remote ? &tables_[t] : nullptr; }
  // Ids of table t's bags this batch found in its hot set, and those it did not (both 0
  // without a hot-row snapshot); for HotRowManager::RecordLookups.
  uint64_t hot_hits(int t) const { return hot_hits_[t]; }
  uint64_t hot_misses(int t) const { return hot_misses_[t]; }
  // Table t's sampled ids of this batch (Stage with a sample period; else empty).
  absl::Span<const int64_t> sampled(int t) const { return sampled_[t]; }

 private:
  friend class RemoteTier;
  // Per remote table, per distinct key of the batch.
  struct Key {
    int64_t id = 0;
    uint32_t uses = 0;  // ids of the batch with this key
    Tier tier = Tier::kAbsent;
    bool failed = false;
  };
  // A key to fetch: table and slot.
  struct Pending {
    int table = 0;
    int32_t slot = 0;
  };

  std::vector<int32_t> user_rows_;
  std::vector<int32_t> item_rows_;
  std::vector<EmbeddingTable> tables_;         // per model table
  std::vector<std::vector<std::byte>> bytes_;  // per table: staged values (slot * value_bytes)
  std::vector<std::vector<float>> qparams_;    // per int8 table: staged (scale, bias) pairs
  std::vector<uint64_t> hot_hits_;             // per table
  std::vector<uint64_t> hot_misses_;           // per table
  std::vector<std::vector<int64_t>> sampled_;  // per table
  int64_t countdown_ = 1;                      // id uses until the next sample
  std::vector<std::vector<Key>> keys_;         // per table: slot -> key
  absl::flat_hash_map<int64_t, int32_t> slot_of_;
  std::vector<Pending> pending_;
  std::vector<std::string> key_text_;
  std::vector<remote::Command> commands_;
  std::vector<remote::Reply> replies_;  // no values: they go straight to bytes_ (Command::out)
  // One table's keys not in its hot set, as NearCache::FindMany takes them: the key, where
  // its row goes, its slot, and what the near cache answered.
  std::vector<int64_t> near_ids_;
  std::vector<std::byte*> near_rows_;
  std::vector<int32_t> near_slots_;
  std::vector<NearCache::Found> near_found_;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_REMOTE_STAGE_H_
