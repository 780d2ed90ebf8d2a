// Per-worker front end of HotRowManager's access counting (cache.policy: frequency):
// keeps about one row access in `sample_period` in per-table buffers with no
// synchronisation and hands them to the manager in Flush(), once per batch. Gaps between
// samples are random with mean `sample_period`, so a batch layout that repeats every k
// ids cannot alias with the sampling. Memory is fixed at construction; samples beyond a
// table's buffer before the next Flush are dropped (counted in dropped()).
// Not thread-safe: one sampler per worker thread; the manager must outlive it.
#ifndef FUSERANK_ENGINE_HOT_ROWS_ACCESS_SAMPLER_H_
#define FUSERANK_ENGINE_HOT_ROWS_ACCESS_SAMPLER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace fuserank::engine {

class HotRowManager;

class AccessSampler {
 public:
  // Samples with manager->options().sample_period; keeps up to `buffer_rows` samples
  // per table between flushes. `seed` varies the gaps between workers.
  explicit AccessSampler(HotRowManager* manager, int buffer_rows = 4096, uint64_t seed = 1);
  ~AccessSampler();  // does not Flush: call it at the end of the batch

  // One access of `row` in table index `table` (cost when not sampled: one decrement
  // and a branch).
  void Observe(int table, int32_t row) {
    if (--countdown_ != 0) return;
    Keep(table, row);
  }
  // Every access of `rows` (a bag, or a table's whole row list of a batch); jumps from
  // sample to sample, so its cost is per sample, not per row.
  void ObserveRows(int table, absl::Span<const int32_t> rows) {
    size_t pos = 0;
    while (rows.size() - pos >= countdown_) {
      pos += countdown_;
      Keep(table, rows[pos - 1]);
    }
    countdown_ -= static_cast<uint32_t>(rows.size() - pos);
  }
  // Hands the buffered samples to the manager (one ObserveRows per non-empty table).
  void Flush();

  uint64_t sampled() const { return sampled_; }
  uint64_t dropped() const { return dropped_; }

  AccessSampler(const AccessSampler&) = delete;
  AccessSampler& operator=(const AccessSampler&) = delete;

 private:
  // Buffers `row` and draws the next gap.
  void Keep(int table, int32_t row);
  uint32_t NextGap();

  HotRowManager* const manager_;
  const uint32_t period_;
  const size_t buffer_rows_;
  uint32_t countdown_ = 1;       // accesses until the next sample, the sampled one included
  uint64_t rng_;                 // xorshift64 state
  std::vector<int32_t> rows_;    // tables x buffer_rows_
  std::vector<uint32_t> sizes_;  // per table
  uint64_t sampled_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_HOT_ROWS_ACCESS_SAMPLER_H_
