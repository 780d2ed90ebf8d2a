// The near cache of one storage: redis table: up to `capacity` rows fetched from the
// cluster (and keys it answered absent), each kept for `ttl` after it was fetched, so
// repeated keys do not travel and a row written to the cluster is served at most `ttl`
// after the write. Sharded by key, each shard a fixed slab with FIFO replacement and an
// open-addressing key index (linear probing, at most half full, deletions by backward
// shift); nothing is allocated after construction, so a shard's arrays never move.
// FindMany looks a batch of keys up with its memory reads overlapped (each key's index
// bucket prefetched, then its slab entry and value, before any is read): a lookup is a few
// cache misses, and one key's wait hides behind the others'. Thread-safe (a mutex per
// shard, held for one probe or one copy).
#ifndef FUSERANK_ENGINE_NEAR_CACHE_H_
#define FUSERANK_ENGINE_NEAR_CACHE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

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
  // Find for every key: found[i] for keys[i], its row copied to outs[i] when kRow. The
  // same answers as Find key by key. REQUIRES: the three spans have the same size.
  void FindMany(absl::Span<const int64_t> keys, Clock::time_point now,
                absl::Span<std::byte* const> outs, absl::Span<Found> found);
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
  // One bucket of a shard's key index: slot -1 is empty.
  struct Bucket {
    int64_t key = 0;
    int32_t slot = -1;
  };
  struct Shard {
    explicit Shard(size_t slots, size_t value_bytes, size_t buckets);
    absl::Mutex mu;
    // The index and the slabs: sized at construction, never reallocated (FindMany
    // prefetches their addresses without the lock).
    std::vector<Bucket> index ABSL_GUARDED_BY(mu);
    std::vector<Entry> entries ABSL_GUARDED_BY(mu);
    std::vector<std::byte> bytes ABSL_GUARDED_BY(mu);
    uint32_t next ABSL_GUARDED_BY(mu) = 0;  // FIFO hand
    // Immutable after construction.
    const Bucket* index_base = nullptr;
    const Entry* entries_base = nullptr;
    const std::byte* bytes_base = nullptr;
    uint64_t mask = 0;  // index size - 1 (a power of two)
  };
  static uint64_t Mix(int64_t key);
  Shard& ShardOf(uint64_t mixed);
  // The bucket holding key in `shard`'s index, or -1.
  static int64_t FindBucket(const Shard& shard, int64_t key, uint64_t mixed)
      ABSL_SHARED_LOCKS_REQUIRED(shard.mu);
  static void EraseBucket(Shard& shard, uint64_t bucket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Reads entry `slot` for key at `now` into out (kRow / kAbsent) or says kMiss.
  Found ReadSlot(const Shard& shard, int32_t slot, int64_t key, Clock::time_point now,
                 std::byte* out) const ABSL_SHARED_LOCKS_REQUIRED(shard.mu);

 public:
  // What one shard adds beside its slabs and index (the Shard itself, rounded up).
  static constexpr size_t kShardOverheadBytes = 256;
  // Bytes of one Entry and of one bucket of a shard's key index.
  static constexpr size_t kEntryBytes = sizeof(Entry);
  static constexpr size_t kIndexSlotBytes = sizeof(Bucket);
  static constexpr size_t kMaxShards = 16;
  // A shard of `slots` entries has IndexBuckets(slots) index buckets.
  static constexpr uint64_t IndexBuckets(uint64_t slots) {
    uint64_t buckets = 2;
    while (buckets < 2 * slots) buckets *= 2;
    return buckets;
  }

 private:
  const size_t capacity_;
  const size_t value_bytes_;
  const std::chrono::milliseconds ttl_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_NEAR_CACHE_H_
