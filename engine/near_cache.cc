#include "engine/near_cache.h"

#include <algorithm>
#include <cstring>

namespace fuserank::engine {
NearCache::NearCache(size_t capacity, size_t value_bytes, std::chrono::milliseconds ttl)
    : capacity_(capacity), value_bytes_(value_bytes), ttl_(ttl) {
  if (capacity == 0) return;
  const size_t shards = std::min(kMaxShards, capacity);
  const size_t per_shard = (capacity + shards - 1) / shards;
  for (size_t s = 0; s < shards; ++s) {
    auto shard = std::make_unique<Shard>();
    absl::MutexLock lock(&shard->mu);
    shard->entries.resize(per_shard);
    shard->bytes.resize(per_shard * value_bytes);
    shard->slot_of.reserve(per_shard);
    shards_.push_back(std::move(shard));
  }
}

size_t NearCache::MemoryBytes() const {
  size_t bytes = shards_.capacity() * sizeof(shards_[0]);
  for (const std::unique_ptr<Shard>& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    static_assert(sizeof(Shard) <= kShardOverheadBytes);
    // The index: its slots, a control byte each, and the group of control bytes cloned.
    bytes += sizeof(Shard) + shard->entries.capacity() * sizeof(Entry) + shard->bytes.capacity() +
             shard->slot_of.capacity() * kIndexSlotBytes + 16;
  }
  return bytes;
}

NearCache::Shard& NearCache::ShardOf(int64_t key) {
  // A multiplicative mix: consecutive keys land on different shards.
  const uint64_t h = static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ULL;
  return *shards_[(h >> 32) % shards_.size()];
}

NearCache::Found NearCache::Find(int64_t key, Clock::time_point now, std::byte* out) {
  if (shards_.empty()) return Found::kMiss;
  Shard& shard = ShardOf(key);
  absl::MutexLock lock(&shard.mu);
  const auto it = shard.slot_of.find(key);
  if (it == shard.slot_of.end()) return Found::kMiss;
  const Entry& entry = shard.entries[it->second];
  if (now >= entry.expires) return Found::kMiss;
  if (entry.absent) return Found::kAbsent;
  std::memcpy(out, shard.bytes.data() + static_cast<size_t>(it->second) * value_bytes_,
              value_bytes_);
  return Found::kRow;
}

void NearCache::Insert(int64_t key, const std::byte* value, Clock::time_point now) {
  if (shards_.empty()) return;
  Shard& shard = ShardOf(key);
  absl::MutexLock lock(&shard.mu);
  uint32_t slot = 0;
  if (const auto it = shard.slot_of.find(key); it != shard.slot_of.end()) {
    slot = it->second;  // refreshed in place
  } else {
    slot = shard.next;
    shard.next = (shard.next + 1) % shard.entries.size();
    Entry& old = shard.entries[slot];
    if (old.used) shard.slot_of.erase(old.key);
    shard.slot_of.emplace(key, slot);
  }
  Entry& entry = shard.entries[slot];
  entry = {key, now + ttl_, true, value == nullptr};
  if (value != nullptr) {
    std::memcpy(shard.bytes.data() + static_cast<size_t>(slot) * value_bytes_, value, value_bytes_);
  }
}

}  // namespace fuserank::engine
