#include "engine/hot_rows/hot_row_index.h"

#include "absl/base/internal/raw_logging.h"

namespace fuserank::engine {

HotRowIndex::HotRowIndex(absl::Span<const int32_t> rows) {
  ABSL_RAW_CHECK(rows.size() <= (size_t{1} << 29), "hot set too large");
  int bits = 1;
  while ((size_t{1} << bits) < 2 * rows.size()) ++bits;
  const size_t size = size_t{1} << bits;
  keys_.assign(size, kEmpty);
  values_.assign(size, -1);
  mask_ = static_cast<uint32_t>(size - 1);
  shift_ = 32 - bits;
  for (size_t slot = 0; slot < rows.size(); ++slot) {
    const int32_t row = rows[slot];
    ABSL_RAW_CHECK(row >= 0, "negative row in a hot set");
    uint32_t i = Home(row, shift_);
    while (keys_[i] != kEmpty) {
      ABSL_RAW_CHECK(keys_[i] != row, "duplicate row in a hot set");
      i = (i + 1) & mask_;
    }
    keys_[i] = row;
    values_[i] = static_cast<int32_t>(slot);
  }
}

}  // namespace fuserank::engine
