// The near cache of one storage: redis table: up to `capacity` rows fetched from the
// cluster (and keys it answered absent), each kept for `ttl` after it was fetched, so
// repeated keys do not travel and a row written to the cluster is served at most `ttl`
// after the write. Sharded by key, each shard a fixed slab with FIFO replacement; nothing
// is allocated after construction. Thread-safe (a mutex per shard, held for one copy).
#ifndef FUSERANK_ENGINE_NEAR_CACHE_H_
#define FUSERANK_ENGINE_NEAR_CACHE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace fuserank::engine {

class NearCache {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Found { kMiss, kRow, kAbsent };

  // capacity 0: a cache that holds nothing (every Find misses).
  NearCache(size_t capacity, size_t value_bytes, std::chrono::milliseconds ttl);

  // kRow: the row's value_bytes were copied to `out`; kAbsent: the cluster answered that
  // it holds no such key (within the ttl); kMiss: not cached, or expired.
  Found Find(int64_t key, Clock::time_point now, std::byte* out);
  // Caches `value` (value_bytes; null: the key is absent) for key, fetched at `now`.
  void Insert(int64_t key, const std::byte* value, Clock::time_point now);

  size_t capacity() const { return capacity_; }
  // The bytes this cache holds: its shards, their slabs and key indexes. The memory budget
  // counts a near cache before it exists with NearCacheBytes (engine/model_memory.h).
  size_t MemoryBytes() const;

 private:
  struct Entry {
    int64_t key = 0;
    Clock::time_point expires;
    bool used = false;
    bool absent = false;
  };
  struct Shard {
    absl::Mutex mu;
    absl::flat_hash_map<int64_t, uint32_t> slot_of ABSL_GUARDED_BY(mu);
    std::vector<Entry> entries ABSL_GUARDED_BY(mu);
    std::vector<std::byte> bytes ABSL_GUARDED_BY(mu);
    uint32_t next ABSL_GUARDED_BY(mu) = 0;  // FIFO hand
  };
  Shard& ShardOf(int64_t key);

 public:
  // What one shard adds beside its slabs and index (the Shard itself, rounded up).
  static constexpr size_t kShardOverheadBytes = 256;
  // Bytes of one Entry and of one slot of a shard's key index (a key, a slot number).
  static constexpr size_t kEntryBytes = sizeof(Entry);
  static constexpr size_t kIndexSlotBytes = sizeof(std::pair<const int64_t, uint32_t>) + 1;
  static constexpr size_t kMaxShards = 16;

 private:
  const size_t capacity_;
  const size_t value_bytes_;
  const std::chrono::milliseconds ttl_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_NEAR_CACHE_H_
