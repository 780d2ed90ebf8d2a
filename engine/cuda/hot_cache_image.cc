#include "engine/cuda/hot_cache_image.h"

#include <cstring>

#include "engine/check.h"
#include "engine/cuda/device_rows.h"
#include "engine/hot_rows/hot_row_index.h"

namespace fuserank::engine::cuda {

static_assert(kernels::kHotEmpty == HotRowIndex::kEmpty, "the same empty key");

kernels::HotCacheTable HotCacheImage::Table(const kernels::HotCacheEntry* d_index,
                                            const unsigned char* d_rows) const {
  kernels::HotCacheTable t;
  if (count == 0) return t;
  t.d_index = d_index;
  t.d_rows = d_rows;
  t.mask = mask;
  t.shift = shift;
  t.multiplier = multiplier;  // the device probe hashes as the host index does
  return t;
}

HotCacheImage MakeHotCacheImage(const EmbeddingTable& table, const HotSet& set) {
  const EmbeddingTable& compact = set.compact_table();
  FUSERANK_CHECK(compact.dtype == table.dtype && compact.dim == table.dim)
      << "hot set of table '" << compact.name << "' does not match table '" << table.name << "'";
  HotCacheImage image;
  image.count = set.size();
  if (image.count == 0) return image;
  const HotRowIndex& index = set.index();
  image.mask = index.mask();
  image.shift = index.shift();
  image.multiplier = index.multiplier();
  image.index.resize(index.keys().size());
  for (size_t i = 0; i < image.index.size(); ++i) {
    image.index[i] = kernels::HotCacheEntry{index.keys()[i], index.values()[i]};
  }
  const size_t row_bytes = DeviceRowBytes(table);
  image.rows.resize(static_cast<size_t>(image.count) * row_bytes);
  if (DeviceRowsAreStored(table)) {
    std::memcpy(image.rows.data(), compact.data, image.rows.size());
  } else {
    PackInt8Rows(compact, 0, image.count, image.rows.data());
  }
  return image;
}

std::vector<HotCacheImage> MakeHotCacheImages(const Model& model, const GpuLayout& layout,
                                              const HotRowSnapshot& snapshot) {
  std::vector<HotCacheImage> images;
  images.reserve(layout.lookup_spec_index.size());
  for (const int spec : layout.lookup_spec_index) {
    images.push_back(MakeHotCacheImage(model.tables()[spec], snapshot.table(spec)));
  }
  return images;
}

}  // namespace fuserank::engine::cuda
