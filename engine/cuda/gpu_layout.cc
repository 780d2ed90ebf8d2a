#include "engine/cuda/gpu_layout.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/cuda/device_rows.h"
#include "engine/model_types.h"
#include "engine/status_macros.h"
#include "kernels/layout_math.h"

namespace fuserank::engine::cuda {

kernels::RowType RowTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return kernels::RowType::kF16;
    case DType::kBF16:
      return kernels::RowType::kBF16;
    case DType::kInt8:
      return kernels::RowType::kInt8;
    default:
      return kernels::RowType::kF32;
  }
}

int PaddedLd(int width) { return static_cast<int>(kernels::RoundUp(std::max(width, 1), 4)); }

std::vector<float> PitchedRows(absl::Span<const float> src, int rows, int cols, int ld) {
  std::vector<float> out(static_cast<size_t>(rows) * ld, 0.0f);
  for (int r = 0; r < rows; ++r) {
    std::copy_n(src.data() + static_cast<size_t>(r) * cols, cols,
                out.data() + static_cast<size_t>(r) * ld);
  }
  return out;
}

namespace {

// Dense widths, z and the bottom MLP's input pitch.
absl::Status SetDense(const Model& model, GpuLayout* g) {
  const ModelSpec& spec = model.spec();
  g->interaction = spec.interaction;
  g->user_tables = static_cast<int>(model.user_tables().size());
  g->item_tables = static_cast<int>(model.item_tables().size());
  g->dense_user = spec.dense_user;
  g->dense_item = spec.dense_item;
  g->bottom_mlp = !model.bottom_mlp().empty();
  const int dense = spec.dense_total();
  if (g->bottom_mlp && dense == 0) return absl::InternalError("bottom MLP without dense features");
  g->z_width = spec.z_width();
  g->x_ld = g->bottom_mlp ? PaddedLd(dense) : 0;
  if (g->bottom_mlp && model.bottom_mlp().front().in != dense) {
    return absl::InternalError("bottom MLP input width is not the dense width");
  }
  if (g->bottom_mlp && model.bottom_mlp().back().out != g->z_width) {
    return absl::InternalError("bottom MLP output width is not the spec's z width");
  }
  return absl::OkStatus();
}

// The row type, the lookup's lane group and the reorder pass's row stride (of device
// rows: an int8 row carries its scale and bias).
absl::Status SetLookupShape(const Model& model, GpuLayout* g) {
  int max_units = 1;
  size_t max_row_bytes = 0;
  g->row_type = RowTypeOf(model.spec().embedding_dtype);
  for (const EmbeddingTable& t : model.tables()) {
    if (t.dtype != model.spec().embedding_dtype) {
      return absl::InternalError(
          absl::StrCat("table '", t.name, "': its dtype is not the model's embedding_dtype"));
    }
    if (t.dtype == DType::kInt8 && t.qparams == nullptr) {
      return absl::InternalError(absl::StrCat("table '", t.name, "': int8 without qparams"));
    }
    max_units = std::max(max_units, kernels::RowUnits(t.dim, DTypeBytes(t.dtype)));
    max_row_bytes = std::max(max_row_bytes, DeviceRowBytes(t));
  }
  g->lanes = kernels::LookupLanes(max_units);
  g->gather_stride = kernels::RoundUp(static_cast<uint32_t>(max_row_bytes), 16);
  return absl::OkStatus();
}

// Columns of each table's pooled vector (out_col): the user block in user-table order; the
// item block (dot) in item-table order, or h itself (concat, linear) in spec order; and
// the interaction's slots and widths.
absl::Status SetColumns(const Model& model, GpuLayout* g, std::vector<int>* out_col) {
  const auto& tables = model.tables();
  out_col->assign(tables.size(), 0);
  std::vector<int> h_col(tables.size(), 0);
  int user_width = 0;
  int item_width = 0;
  int h_next = g->z_width;  // concat(V): z, then every table in spec order
  for (size_t s = 0; s < tables.size(); ++s) {
    h_col[s] = h_next;
    h_next += tables[s].dim;
  }
  for (int s : model.user_tables()) {
    (*out_col)[s] = user_width;
    user_width += tables[s].dim;
  }
  const bool dot = g->interaction == Interaction::kDot;
  for (int s : model.item_tables()) {
    (*out_col)[s] = dot ? item_width : h_col[s];
    item_width += tables[s].dim;
  }
  g->user_ld = PaddedLd(user_width);
  // dot: z, then the dot of every pair of vectors; concat, linear, dcn: concat(V).
  g->h_width = model.spec().interaction_width();
  if (dot) {
    g->dim = tables.empty() ? g->z_width : tables.front().dim;
    for (const EmbeddingTable& t : tables) {
      if (t.dim != g->dim) return absl::InternalError("dot interaction with unequal widths");
    }
    if (g->z_width != 0 && g->z_width != g->dim) {
      return absl::InternalError("dot interaction: z width differs from the table width");
    }
    g->item_ld = PaddedLd(item_width);
    for (size_t s = 0; s < tables.size(); ++s) {
      g->dot_slots.push_back({tables[s].side == Side::kUser ? 1 : 0, (*out_col)[s]});
    }
  } else {
    for (int s : model.user_tables()) {
      g->concat_slots.push_back({(*out_col)[s], h_col[s], tables[s].dim});
    }
  }
  g->h_ld = PaddedLd(g->h_width);
  if (!dot) g->item_ld = g->h_ld;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GpuLayout> ComputeGpuLayout(const Model& model) {
  GpuLayout g;
  RETURN_IF_ERROR(SetDense(model, &g));
  RETURN_IF_ERROR(SetLookupShape(model, &g));
  std::vector<int> out_col;
  RETURN_IF_ERROR(SetColumns(model, &g, &out_col));
  if (model.top_mlp().empty() || model.top_mlp().front().in != g.h_width ||
      model.top_mlp().back().out != 1) {
    return absl::InternalError(
        absl::StrCat("top MLP does not take the interaction width ", g.h_width, " to one logit"));
  }
  if (g.interaction == Interaction::kDcn) {
    g.dcn_layers = static_cast<int>(model.dcn().size());
    g.dcn_rank = model.spec().dcn.low_rank;
    g.dcn_t_ld = PaddedLd(g.dcn_rank);
  }
  g.hidden_ld = 4;
  for (const auto* mlp : {&model.bottom_mlp(), &model.top_mlp()}) {
    for (const DenseLayer& l : *mlp) g.hidden_ld = std::max(g.hidden_ld, PaddedLd(l.out));
  }
  const auto& tables = model.tables();
  auto add = [&](int s) {
    const EmbeddingTable& t = tables[s];
    kernels::LookupTable d;
    d.row_bytes = static_cast<uint32_t>(DeviceRowBytes(t));
    d.dim = t.dim;
    d.mean = t.pooling == Pooling::kMean ? 1 : 0;
    d.vector = kernels::UseVectorLoads(t.dim, DTypeBytes(t.dtype)) && d.row_bytes % 16 == 0;
    d.out_col = out_col[s];
    g.lookup.push_back(d);
    g.lookup_spec_index.push_back(s);
  };
  for (int s : model.user_tables()) add(s);
  for (int s : model.item_tables()) add(s);
  return g;
}

}  // namespace fuserank::engine::cuda
