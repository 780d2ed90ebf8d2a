#include "engine/hot_rows/hot_row_index.h"

#include <random>

#include "absl/base/internal/raw_logging.h"

namespace fuserank::engine {
namespace {

constexpr int kMaxDraws = 8;

}  // namespace

uint32_t HotRowIndex::RandomMultiplier() {
  std::random_device entropy;
  return static_cast<uint32_t>(entropy()) | 0x80000001u;
}

size_t HotRowIndex::MaxRun(size_t size) {
  size_t bits = 0;
  while ((size_t{1} << bits) < size) ++bits;
  return 8 * bits;
}

HotRowIndex::HotRowIndex(absl::Span<const int32_t> rows) {
  if (rows.empty()) {  // every probe misses whatever the multiplier: no draw
    Build(rows, 1);
    return;
  }
  Build(rows, RandomMultiplier());
  // A rare draw spreads these rows badly (runs far longer than linear probing gives at
  // load 0.5): draw again, keep the best.
  uint32_t best = multiplier_;
  size_t best_run = LongestRun();
  for (int draw = 1; draw < kMaxDraws && best_run > MaxRun(keys_.size()); ++draw) {
    Build(rows, RandomMultiplier());
    const size_t run = LongestRun();
    if (run < best_run) {
      best = multiplier_;
      best_run = run;
    }
  }
  if (best != multiplier_) Build(rows, best);
}

HotRowIndex::HotRowIndex(absl::Span<const int32_t> rows, uint32_t multiplier) {
  ABSL_RAW_CHECK((multiplier & 1) == 1, "the multiplier of a hot-row index must be odd");
  Build(rows, multiplier);
}

void HotRowIndex::Build(absl::Span<const int32_t> rows, uint32_t multiplier) {
  ABSL_RAW_CHECK(rows.size() <= (size_t{1} << 29), "hot set too large");
  int bits = 1;
  while ((size_t{1} << bits) < 2 * rows.size()) ++bits;
  const size_t size = size_t{1} << bits;
  keys_.assign(size, kEmpty);
  values_.assign(size, -1);
  mask_ = static_cast<uint32_t>(size - 1);
  shift_ = 32 - bits;
  multiplier_ = multiplier;
  for (size_t slot = 0; slot < rows.size(); ++slot) {
    const int32_t row = rows[slot];
    ABSL_RAW_CHECK(row >= 0, "negative row in a hot set");
    uint32_t i = Home(row, multiplier_, shift_);
    while (keys_[i] != kEmpty) {
      ABSL_RAW_CHECK(keys_[i] != row, "duplicate row in a hot set");
      i = (i + 1) & mask_;
    }
    keys_[i] = row;
    values_[i] = static_cast<int32_t>(slot);
  }
}

size_t HotRowIndex::LongestRun() const {
  // Runs wrap around the end; at least one entry is empty (load <= 0.5), so start after one.
  size_t start = 0;
  while (keys_[start] != kEmpty) ++start;
  size_t longest = 0;
  size_t run = 0;
  for (size_t k = 1; k <= keys_.size(); ++k) {
    if (keys_[(start + k) & mask_] == kEmpty) {
      run = 0;
    } else if (++run > longest) {
      longest = run;
    }
  }
  return longest;
}

}  // namespace fuserank::engine
