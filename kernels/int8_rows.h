// How a row-wise quantized (int8) table row lies in device memory and how one value is
// decoded, shared by the host code that builds the device rows, the lookup kernel and its
// CPU tests. A device row is the row's `dim` signed codes, zeros up to a multiple of 8
// bytes, then its (scale, bias) as two floats, then zeros up to a multiple of 16 bytes:
// one row is one contiguous record, so the lookup reads a row's codes and parameters
// from the same place and the id-reorder gather copies both in one pass. Pure functions;
// no CUDA header is needed to include this file.
#ifndef FUSERANK_KERNELS_INT8_ROWS_H_
#define FUSERANK_KERNELS_INT8_ROWS_H_

#include <cmath>
#include <cstdint>

#include "kernels/hd.h"
#include "kernels/layout_math.h"

namespace fuserank::kernels {

// Byte offset of (scale, bias) in a device row: 8-byte aligned, so one 8-byte load reads
// both (rows themselves are 16-byte aligned).
FUSERANK_HD uint32_t Int8ParamsOffset(int dim) { return RoundUp(static_cast<uint32_t>(dim), 8); }

// Bytes of one device row: a multiple of 16, so every row of a table stays 16-byte
// aligned for the vector loads (dim 128: 144 bytes, against 128 + 8 on the host).
FUSERANK_HD uint32_t Int8DeviceRowBytes(int dim) { return RoundUp(Int8ParamsOffset(dim) + 8, 16); }

// The value of code q: scale * q + bias as one fused multiply-add, as the CPU engine's
// AVX2+FMA path computes it (GCC contracts engine/cpu/cpu_lookup.cc's `scale * q + bias`
// and `out[j] += w * value` into FMAs there); the lookup then adds w * value with one more
// (fmaf, as for every row type), so an int8 bag pools to the bits of that CPU path. The
// generic CPU path (no FMA) rounds twice and differs in the last bits.
FUSERANK_HD float DequantizeInt8(int8_t q, float scale, float bias) {
  return fmaf(scale, static_cast<float>(q), bias);
}

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_INT8_ROWS_H_
