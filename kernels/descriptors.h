// Plain descriptors the kernels read from device memory, filled on the host when a model
// is uploaded: embedding tables for the lookup, vector slots for the interactions, and
// the (index, score) result pair. No CUDA header is needed to include this file.
#ifndef FUSERANK_KERNELS_DESCRIPTORS_H_
#define FUSERANK_KERNELS_DESCRIPTORS_H_

#include <cstdint>

namespace fuserank::kernels {

// kInt8: row-wise quantized rows in the device layout of kernels/int8_rows.h.
enum class RowType : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2, kInt8 = 3 };

// One table as the lookup kernel reads it. Lives in device memory (an array of user
// tables followed by item tables), written once when the model is uploaded. The row type
// is the launch's (LookupArgs::row_type), the same for every table of a model.
struct LookupTable {
  const unsigned char* d_rows = nullptr;  // rows x row_bytes, 256-byte aligned
  uint32_t row_bytes = 0;  // of a device row (int8: Int8DeviceRowBytes, codes + scale/bias)
  int32_t dim = 0;
  int32_t mean = 0;     // 1: divide by the sum of the weights (0 when that sum is 0)
  int32_t vector = 0;   // 1: read 16-byte vectors (UseVectorLoads and row_bytes % 16 == 0)
  int32_t out_col = 0;  // first output column of this table's pooled vector
};

// Where vector V_k (k = 1..T, tables in spec order) of the dot interaction is read:
// the pooled user block (user = 1, row = request) or the item block (row = candidate).
struct DotSlot {
  int32_t user = 0;
  int32_t col = 0;
};

// One user table's block in the concat layout: dim floats from column user_col of the
// request's pooled user row go to column h_col of each of its candidates' h rows.
struct ConcatSlot {
  int32_t user_col = 0;
  int32_t h_col = 0;
  int32_t dim = 0;
};

// One top-K result: the candidate's index within its request and its score. Same layout
// as engine::ScoredIndex, so results copy back without conversion.
struct ScoredPair {
  uint32_t index;
  float score;
};

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_DESCRIPTORS_H_
