#include "engine/near_cache.h"

#include <algorithm>
#include <cstring>

#include "engine/check.h"

namespace fuserank::engine {
namespace {

// Keys looked up together by FindMany: enough misses in flight to hide each other's wait,
// few enough that the first prefetched lines are still in L1 when they are read.
constexpr size_t kWindow = 16;

inline void Prefetch(const void* address) { __builtin_prefetch(address, 0, 3); }

}  // namespace

NearCache::Shard::Shard(size_t slots, size_t value_bytes, size_t buckets) {
  absl::MutexLock lock(&mu);
  index.resize(buckets);
  entries.resize(slots);
  bytes.resize(slots * value_bytes);
  index_base = index.data();
  entries_base = entries.data();
  bytes_base = bytes.data();
  mask = buckets - 1;
}

NearCache::NearCache(size_t capacity, size_t value_bytes, std::chrono::milliseconds ttl)
    : capacity_(capacity), value_bytes_(value_bytes), ttl_(ttl) {
  if (capacity == 0) return;
  const size_t shards = std::min(kMaxShards, capacity);
  const size_t per_shard = (capacity + shards - 1) / shards;
  for (size_t s = 0; s < shards; ++s) {
    shards_.push_back(std::make_unique<Shard>(per_shard, value_bytes,
                                              static_cast<size_t>(IndexBuckets(per_shard))));
  }
}

size_t NearCache::MemoryBytes() const {
  size_t bytes = shards_.capacity() * sizeof(shards_[0]);
  for (const std::unique_ptr<Shard>& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    static_assert(sizeof(Shard) <= kShardOverheadBytes);
    bytes += sizeof(Shard) + shard->entries.capacity() * sizeof(Entry) + shard->bytes.capacity() +
             shard->index.capacity() * sizeof(Bucket);
  }
  return bytes;
}

uint64_t NearCache::Mix(int64_t key) {
  // splitmix64's finalizer: every bit of the key moves every bit of the result, so the
  // shard (high bits) and the bucket (low bits) are independent and neither follows a
  // pattern in the keys.
  uint64_t h = static_cast<uint64_t>(key) + 0x9E3779B97F4A7C15ULL;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ULL;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBULL;
  return h ^ (h >> 31);
}

NearCache::Shard& NearCache::ShardOf(uint64_t mixed) {
  return *shards_[(mixed >> 32) % shards_.size()];
}

int64_t NearCache::FindBucket(const Shard& shard, int64_t key, uint64_t mixed) {
  for (uint64_t b = mixed & shard.mask;; b = (b + 1) & shard.mask) {
    const Bucket& bucket = shard.index[b];
    if (bucket.slot < 0) return -1;  // at most half full: an empty bucket ends every probe
    if (bucket.key == key) return static_cast<int64_t>(b);
  }
}

void NearCache::EraseBucket(Shard& shard, uint64_t bucket) {
  // Backward shift: move later buckets of the same probe run up into the hole, so that no
  // probe ever meets a hole before its key.
  uint64_t hole = bucket;
  for (uint64_t b = (hole + 1) & shard.mask; shard.index[b].slot >= 0; b = (b + 1) & shard.mask) {
    const uint64_t home = Mix(shard.index[b].key) & shard.mask;
    // The bucket at b may move to the hole when its home is not in (hole, b] cyclically.
    const bool in_between = hole <= b ? (home > hole && home <= b) : (home > hole || home <= b);
    if (!in_between) {
      shard.index[hole] = shard.index[b];
      hole = b;
    }
  }
  shard.index[hole] = Bucket{};
}

NearCache::Found NearCache::ReadSlot(const Shard& shard, int32_t slot, int64_t key,
                                     Clock::time_point now, std::byte* out) const {
  const Entry& entry = shard.entries[static_cast<size_t>(slot)];
  if (!entry.used || entry.key != key || now >= entry.expires) return Found::kMiss;
  if (entry.absent) return Found::kAbsent;
  std::memcpy(out, shard.bytes.data() + static_cast<size_t>(slot) * value_bytes_, value_bytes_);
  return Found::kRow;
}

NearCache::Found NearCache::Find(int64_t key, Clock::time_point now, std::byte* out) {
  if (shards_.empty()) return Found::kMiss;
  const uint64_t mixed = Mix(key);
  Shard& shard = ShardOf(mixed);
  absl::MutexLock lock(&shard.mu);
  const int64_t b = FindBucket(shard, key, mixed);
  if (b < 0) return Found::kMiss;
  return ReadSlot(shard, shard.index[static_cast<size_t>(b)].slot, key, now, out);
}

void NearCache::FindMany(absl::Span<const int64_t> keys, Clock::time_point now,
                         absl::Span<std::byte* const> outs, absl::Span<Found> found) {
  FUSERANK_CHECK(keys.size() == outs.size() && keys.size() == found.size())
      << "NearCache::FindMany: " << keys.size() << " keys, " << outs.size() << " outs, "
      << found.size() << " found";
  if (shards_.empty()) {
    std::fill(found.begin(), found.end(), Found::kMiss);
    return;
  }
  uint64_t mixed[kWindow];
  int32_t slot[kWindow];
  for (size_t begin = 0; begin < keys.size(); begin += kWindow) {
    const size_t n = std::min(kWindow, keys.size() - begin);
    // 1. Every key's index bucket (the arrays never move: no lock needed to prefetch).
    for (size_t i = 0; i < n; ++i) {
      mixed[i] = Mix(keys[begin + i]);
      const Shard& shard = ShardOf(mixed[i]);
      Prefetch(shard.index_base + (mixed[i] & shard.mask));
    }
    // 2. Probe each, and prefetch what the probe found: the entry and its value.
    for (size_t i = 0; i < n; ++i) {
      Shard& shard = ShardOf(mixed[i]);
      absl::MutexLock lock(&shard.mu);
      const int64_t b = FindBucket(shard, keys[begin + i], mixed[i]);
      slot[i] = b < 0 ? -1 : shard.index[static_cast<size_t>(b)].slot;
      if (slot[i] >= 0) {
        Prefetch(shard.entries_base + slot[i]);
        Prefetch(shard.bytes_base + static_cast<size_t>(slot[i]) * value_bytes_);
      }
    }
    // 3. Read: the slot is checked again under the lock (replaced meanwhile: a miss).
    for (size_t i = 0; i < n; ++i) {
      if (slot[i] < 0) {
        found[begin + i] = Found::kMiss;
        continue;
      }
      Shard& shard = ShardOf(mixed[i]);
      absl::MutexLock lock(&shard.mu);
      found[begin + i] = ReadSlot(shard, slot[i], keys[begin + i], now, outs[begin + i]);
    }
  }
}

void NearCache::Insert(int64_t key, const std::byte* value, Clock::time_point now) {
  if (shards_.empty()) return;
  const uint64_t mixed = Mix(key);
  Shard& shard = ShardOf(mixed);
  absl::MutexLock lock(&shard.mu);
  int32_t slot = 0;
  if (const int64_t b = FindBucket(shard, key, mixed); b >= 0) {
    slot = shard.index[static_cast<size_t>(b)].slot;  // refreshed in place
  } else {
    slot = static_cast<int32_t>(shard.next);
    shard.next = (shard.next + 1) % shard.entries.size();
    const Entry& old = shard.entries[static_cast<size_t>(slot)];
    if (old.used) {
      const int64_t old_bucket = FindBucket(shard, old.key, Mix(old.key));
      FUSERANK_CHECK(old_bucket >= 0) << "NearCache: a used slot's key is not in the index";
      EraseBucket(shard, static_cast<uint64_t>(old_bucket));
    }
    uint64_t empty = mixed & shard.mask;
    while (shard.index[empty].slot >= 0) empty = (empty + 1) & shard.mask;
    shard.index[empty] = Bucket{key, slot};
  }
  Entry& entry = shard.entries[static_cast<size_t>(slot)];
  entry = {key, now + ttl_, true, value == nullptr};
  if (value != nullptr) {
    std::memcpy(shard.bytes.data() + static_cast<size_t>(slot) * value_bytes_, value, value_bytes_);
  }
}

}  // namespace fuserank::engine
