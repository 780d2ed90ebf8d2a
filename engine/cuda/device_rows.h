// How an embedding table's rows are laid out in device memory: fp32, fp16 and bf16 rows
// exactly as the Model stores them; int8 rows repacked into one record per row, its codes
// followed by its (scale, bias) (kernels/int8_rows.h), so the lookup kernel and the
// id-reorder gather read a row from one place. Plain C++ (no CUDA), unit-tested on the
// CPU. Pure functions, thread-safe.
#ifndef FUSERANK_ENGINE_CUDA_DEVICE_ROWS_H_
#define FUSERANK_ENGINE_CUDA_DEVICE_ROWS_H_

#include <cstddef>
#include <cstdint>

#include "engine/model.h"

namespace fuserank::engine::cuda {

// Bytes of one device row of `table` (int8: kernels::Int8DeviceRowBytes(dim)).
size_t DeviceRowBytes(const EmbeddingTable& table);

// True when the device rows are the Model's bytes as they are (every dtype but int8).
bool DeviceRowsAreStored(const EmbeddingTable& table);

// Writes device rows [first, first + count) of an int8 table into `dst`
// (count * DeviceRowBytes(table) bytes): codes, zero padding, scale, bias, zero padding.
// REQUIRES: table.dtype is kInt8 with qparams; 0 <= first, first + count <= table.rows.
void PackInt8Rows(const EmbeddingTable& table, int64_t first, int64_t count, std::byte* dst);

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_DEVICE_ROWS_H_
