// Where every intermediate of the GPU forward pass lives: row pitches of the dense input,
// the pooled user and item blocks and the first top-layer input h, each table's output
// column, and the slot lists the interaction kernels read. Computed once per model from
// the Model alone (no CUDA), so it is unit-tested without a GPU. Plain data.
#ifndef FUSERANK_ENGINE_CUDA_GPU_LAYOUT_H_
#define FUSERANK_ENGINE_CUDA_GPU_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model.h"
#include "kernels/descriptors.h"

namespace fuserank::engine::cuda {

struct GpuLayout {
  Interaction interaction = Interaction::kConcat;
  int user_tables = 0;  // U: Model::user_tables().size()
  int item_tables = 0;  // I
  int dense_user = 0;
  int dense_item = 0;
  bool bottom_mlp = false;
  int z_width = 0;  // 0 without dense features
  int dim = 0;      // dot: the common vector width
  int x_ld = 0;     // dense input [candidates, x_ld] (bottom MLP input); 0 without one
  int h_width = 0;  // first top-layer input width
  int h_ld = 0;
  int user_ld = 0;     // pooled user block [requests, user_ld]
  int item_ld = 0;     // pooled item block [candidates, item_ld] (dot; concat writes into h)
  int hidden_ld = 0;   // widest hidden activation between MLP layers
  int dcn_layers = 0;  // dcn: h = x0 = concat(V) as for concat, then the cross layers
  int dcn_rank = 0;    // 0: full rank
  int dcn_t_ld = 0;    // low rank: pitch of V_l x_l [candidates, dcn_t_ld]
  int lanes = 4;       // lookup lane group
  kernels::RowType row_type = kernels::RowType::kF32;  // every table's (embedding_dtype)
  uint32_t gather_stride = 0;  // id-reorder pass: bytes per gathered device row
  // Lookup descriptors without device pointers, user tables then item tables.
  std::vector<kernels::LookupTable> lookup;
  std::vector<int> lookup_spec_index;             // spec index of lookup[k]
  std::vector<kernels::DotSlot> dot_slots;        // dot: one per table, spec order
  std::vector<kernels::ConcatSlot> concat_slots;  // concat/linear: one per user table
};

// Padded row pitch: 16-byte aligned rows for the lookup stores and cuBLASLt.
int PaddedLd(int width);

// The [rows, cols] row-major matrix `src` with its rows `ld` (>= cols) floats apart, the
// pad zero-filled: how an MLP weight is uploaded (MlpLayerShape::w_ld).
std::vector<float> PitchedRows(absl::Span<const float> src, int rows, int cols, int ld);

// The lookup kernel's row type of a table's dtype (fp32, fp16, bf16, int8).
kernels::RowType RowTypeOf(DType dtype);

// Fails (INTERNAL) for a model whose layer widths contradict its tables, whose tables
// differ in dtype, or whose int8 tables lack their (scale, bias) pairs.
absl::StatusOr<GpuLayout> ComputeGpuLayout(const Model& model);

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_GPU_LAYOUT_H_
