#include "engine/cuda/device_rows.h"

#include <cstring>

#include "engine/check.h"
#include "kernels/int8_rows.h"

namespace fuserank::engine::cuda {

bool DeviceRowsAreStored(const EmbeddingTable& table) { return table.dtype != DType::kInt8; }

size_t DeviceRowBytes(const EmbeddingTable& table) {
  return DeviceRowsAreStored(table) ? table.row_bytes : kernels::Int8DeviceRowBytes(table.dim);
}

void PackInt8Rows(const EmbeddingTable& table, int64_t first, int64_t count, std::byte* dst) {
  FUSERANK_CHECK(table.dtype == DType::kInt8 && table.qparams != nullptr)
      << "table '" << table.name << "' is not an int8 table with qparams";
  FUSERANK_CHECK(first >= 0 && count >= 0 && first + count <= table.rows)
      << "rows [" << first << ", " << first + count << ") of " << table.rows;
  const size_t row_bytes = DeviceRowBytes(table);
  const size_t params = kernels::Int8ParamsOffset(table.dim);
  std::memset(dst, 0, static_cast<size_t>(count) * row_bytes);
  for (int64_t k = 0; k < count; ++k) {
    const size_t r = static_cast<size_t>(first + k);
    std::byte* out = dst + static_cast<size_t>(k) * row_bytes;
    std::memcpy(out, table.data + r * table.row_bytes, static_cast<size_t>(table.dim));
    std::memcpy(out + params, table.qparams + 2 * r, 2 * sizeof(float));
  }
}

}  // namespace fuserank::engine::cuda
