#include "engine/hot_rows/access_sampler.h"

#include "engine/hot_rows/hot_row_manager.h"

namespace fuserank::engine {

AccessSampler::AccessSampler(HotRowManager* manager, int buffer_rows, uint64_t seed)
    : manager_(manager),
      period_(static_cast<uint32_t>(manager->options().sample_period)),
      buffer_rows_(static_cast<size_t>(buffer_rows > 0 ? buffer_rows : 1)),
      rng_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {
  if (rng_ == 0) rng_ = 1;
  const size_t tables = manager->model().tables().size();
  rows_.resize(tables * buffer_rows_);
  sizes_.assign(tables, 0);
  countdown_ = NextGap();
}

AccessSampler::~AccessSampler() = default;

uint32_t AccessSampler::NextGap() {
  if (period_ <= 1) return 1;
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  // Uniform in [1, 2 * period - 1]: mean period.
  return 1 + static_cast<uint32_t>((rng_ >> 11) % (2 * static_cast<uint64_t>(period_) - 1));
}

void AccessSampler::Keep(int table, int32_t row) {
  countdown_ = NextGap();
  ++sampled_;
  uint32_t& size = sizes_[table];
  if (size == buffer_rows_) {
    ++dropped_;
    return;
  }
  rows_[static_cast<size_t>(table) * buffer_rows_ + size++] = row;
}

void AccessSampler::Flush() {
  for (size_t t = 0; t < sizes_.size(); ++t) {
    if (sizes_[t] == 0) continue;
    manager_->ObserveRows(static_cast<int>(t),
                          absl::MakeConstSpan(rows_.data() + t * buffer_rows_, sizes_[t]));
    sizes_[t] = 0;
  }
}

}  // namespace fuserank::engine
