// Where every intermediate of the GPU forward pass lives: row pitches of the dense input,
// the pooled user and item blocks and the first top-layer input h, each table's output
// column, and the slot lists the interaction kernels read. Computed once per model from
// the Model alone (no CUDA), so it is unit-tested without a GPU. Plain data.
#ifndef FUSERANK_ENGINE_CUDA_GPU_LAYOUT_H_
#define FUSERANK_ENGINE_CUDA_GPU_LAYOUT_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model.h"
#include "kernels/descriptors.h"
#include "kernels/layout_math.h"

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
  int user_ld = 0;    // pooled user block [requests, user_ld]
  int item_ld = 0;    // pooled item block [candidates, item_ld] (dot; concat writes into h)
  int hidden_ld = 0;  // widest hidden activation between MLP layers
  int lanes = 4;      // lookup lane group
  uint32_t gather_stride = 0;  // id-reorder pass: bytes per gathered row
  // Lookup descriptors without device pointers, user tables then item tables.
  std::vector<kernels::LookupTable> lookup;
  std::vector<int> lookup_spec_index;             // spec index of lookup[k]
  std::vector<kernels::DotSlot> dot_slots;        // dot: one per table, spec order
  std::vector<kernels::ConcatSlot> concat_slots;  // concat/linear: one per user table
};

// Padded row pitch: 16-byte aligned rows for the lookup stores and cuBLASLt.
inline int PaddedLd(int width) { return static_cast<int>(kernels::RoundUp(std::max(width, 1), 4)); }

inline kernels::RowType RowTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return kernels::RowType::kF16;
    case DType::kBF16:
      return kernels::RowType::kBF16;
    default:
      return kernels::RowType::kF32;
  }
}

inline int ElementBytes(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

// Fails (UNIMPLEMENTED / INTERNAL) for what the GPU path does not serve: int8 tables, or
// a model whose layer widths contradict its tables.
inline absl::StatusOr<GpuLayout> ComputeGpuLayout(const Model& model) {
  const ModelSpec& spec = model.spec();
  GpuLayout g;
  g.interaction = spec.interaction;
  g.user_tables = static_cast<int>(model.user_tables().size());
  g.item_tables = static_cast<int>(model.item_tables().size());
  g.dense_user = spec.dense_user;
  g.dense_item = spec.dense_item;
  g.bottom_mlp = !model.bottom_mlp().empty();
  const int dense = spec.dense_user + spec.dense_item;
  if (g.bottom_mlp && dense == 0) return absl::InternalError("bottom MLP without dense features");
  g.z_width = g.bottom_mlp ? model.bottom_mlp().back().out : dense;
  g.x_ld = g.bottom_mlp ? PaddedLd(dense) : 0;
  if (g.bottom_mlp && model.bottom_mlp().front().in != dense) {
    return absl::InternalError("bottom MLP input width is not the dense width");
  }
  const auto& tables = model.tables();
  int max_units = 1;
  size_t max_row_bytes = 0;
  for (const EmbeddingTable& t : tables) {
    if (t.dtype == DType::kInt8) {
      return absl::UnimplementedError(
          absl::StrCat("table '", t.name, "': int8 tables are not served by the CUDA backend"));
    }
    max_units = std::max(max_units, kernels::RowUnits(t.dim, ElementBytes(t.dtype)));
    max_row_bytes = std::max(max_row_bytes, t.row_bytes);
  }
  g.lanes = kernels::LookupLanes(max_units);
  g.gather_stride = kernels::RoundUp(static_cast<uint32_t>(max_row_bytes), 16);

  // Columns of each table's pooled vector: the user block in user-table order; the item
  // block (dot) in item-table order, or h itself (concat, linear) in spec order.
  std::vector<int> out_col(tables.size(), 0);
  std::vector<int> h_col(tables.size(), 0);
  int user_width = 0;
  int item_width = 0;
  int concat_width = g.z_width;
  for (size_t s = 0; s < tables.size(); ++s) {
    h_col[s] = concat_width;
    concat_width += tables[s].dim;
  }
  for (int s : model.user_tables()) {
    out_col[s] = user_width;
    user_width += tables[s].dim;
  }
  const bool dot = spec.interaction == Interaction::kDot;
  for (int s : model.item_tables()) {
    out_col[s] = dot ? item_width : h_col[s];
    item_width += tables[s].dim;
  }
  g.user_ld = PaddedLd(user_width);
  if (dot) {
    g.dim = tables.empty() ? g.z_width : tables.front().dim;
    for (const EmbeddingTable& t : tables) {
      if (t.dim != g.dim) return absl::InternalError("dot interaction with unequal widths");
    }
    if (g.z_width != 0 && g.z_width != g.dim) {
      return absl::InternalError("dot interaction: z width differs from the table width");
    }
    const int n = static_cast<int>(tables.size()) + (g.z_width > 0 ? 1 : 0);
    g.h_width = g.z_width + static_cast<int>(kernels::NumPairs(n));
    g.item_ld = PaddedLd(item_width);
    for (size_t s = 0; s < tables.size(); ++s) {
      g.dot_slots.push_back({tables[s].side == Side::kUser ? 1 : 0, out_col[s]});
    }
  } else {
    g.h_width = concat_width;
    for (int s : model.user_tables())
      g.concat_slots.push_back({out_col[s], h_col[s], tables[s].dim});
  }
  g.h_ld = PaddedLd(g.h_width);
  if (!dot) g.item_ld = g.h_ld;
  if (model.top_mlp().empty() || model.top_mlp().front().in != g.h_width ||
      model.top_mlp().back().out != 1) {
    return absl::InternalError(
        absl::StrCat("top MLP does not take the interaction width ", g.h_width, " to one logit"));
  }
  g.hidden_ld = 4;
  for (const auto* mlp : {&model.bottom_mlp(), &model.top_mlp()}) {
    for (const DenseLayer& l : *mlp) g.hidden_ld = std::max(g.hidden_ld, PaddedLd(l.out));
  }
  auto add = [&](int s) {
    const EmbeddingTable& t = tables[s];
    kernels::LookupTable d;
    d.row_bytes = static_cast<uint32_t>(t.row_bytes);
    d.dim = t.dim;
    d.type = RowTypeOf(t.dtype);
    d.mean = t.pooling == Pooling::kMean ? 1 : 0;
    d.vector = kernels::UseVectorLoads(t.dim, ElementBytes(t.dtype)) && t.row_bytes % 16 == 0;
    d.out_col = out_col[s];
    g.lookup.push_back(d);
    g.lookup_spec_index.push_back(s);
  };
  for (int s : model.user_tables()) add(s);
  for (int s : model.item_tables()) add(s);
  return g;
}

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_GPU_LAYOUT_H_
