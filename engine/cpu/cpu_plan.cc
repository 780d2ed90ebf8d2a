#include "engine/cpu/cpu_plan.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/model_types.h"

namespace fuserank::engine {
namespace {

// Checks that `layers` chain from `in` inputs and that every tensor has its shape.
absl::Status CheckLayers(const std::vector<DenseLayer>& layers, int in, const char* what) {
  for (size_t i = 0; i < layers.size(); ++i) {
    const DenseLayer& layer = layers[i];
    if (layer.in != in || layer.out <= 0 ||
        layer.weight.size() != static_cast<size_t>(layer.in) * layer.out ||
        layer.bias.size() != static_cast<size_t>(layer.out)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ".", i, ": expected ", in, " inputs, got weight [", layer.out, ", ", layer.in,
          "] with ", layer.weight.size(), " floats and bias of ", layer.bias.size()));
    }
    in = layer.out;
  }
  return absl::OkStatus();
}

absl::Status CheckTables(const Model& model) {
  for (const EmbeddingTable& table : model.tables()) {
    // A storage: redis table's rows (and int8 qparams) are staged per batch
    // (engine/remote_stage.h).
    const bool local_rows = table.remote || (table.rows > 0 && table.data != nullptr);
    if (table.dim <= 0 || !local_rows ||
        table.row_bytes < static_cast<size_t>(table.dim) * DTypeBytes(table.dtype) ||
        (table.dtype == DType::kInt8 && !table.remote && table.qparams == nullptr)) {
      return absl::InvalidArgumentError(
          absl::StrCat("table '", table.name, "': bad shape or storage for the CPU"));
    }
  }
  return absl::OkStatus();
}

// The activation-row and user-share columns of top[0] for the dot interaction.
absl::Status PlanDot(const Model& model, CpuPlan& plan, std::vector<int>& row_columns,
                     std::vector<int>& user_columns) {
  const bool has_z = plan.z_width > 0;
  plan.dot_dim = has_z ? plan.z_width : (model.tables().empty() ? 0 : model.tables()[0].dim);
  for (const EmbeddingTable& table : model.tables()) {
    if (table.dim != plan.dot_dim) {
      return absl::InvalidArgumentError(absl::StrCat("interaction dot: table '", table.name,
                                                     "' has dim ", table.dim,
                                                     ", other vectors have ", plan.dot_dim));
    }
  }
  // V = [z, e_1 .. e_T]; the column of the dot of V_i and V_j (j < i) in the model's h.
  auto column = [&](int a, int b) {
    const int i = std::max(a, b), j = std::min(a, b);
    return plan.z_width + i * (i - 1) / 2 + j;
  };
  const int z = has_z ? 1 : 0;
  std::vector<int> shared;  // V index of each user vector
  for (int t : model.user_tables()) shared.push_back(z + t);
  std::vector<int> own;  // V index of each own vector: z, then the item tables
  if (has_z) own.push_back(0);
  for (int t : model.item_tables()) own.push_back(z + t);
  // DotGramRows order: per own vector o, its dots with the shared ones, then with own < o.
  for (size_t o = 0; o < own.size(); ++o) {
    for (int s : shared) row_columns.push_back(column(own[o], s));
    for (size_t q = 0; q < o; ++q) row_columns.push_back(column(own[o], own[q]));
  }
  for (size_t a = 1; a < shared.size(); ++a) {
    for (size_t b = 0; b < a; ++b) {
      plan.user_terms.push_back({0, plan.user_offset[a], 0, plan.user_offset[b]});
      user_columns.push_back(column(shared[a], shared[b]));
    }
  }
  plan.own_vectors = static_cast<int>(own.size());
  plan.item_base = has_z ? plan.dot_dim : 0;
  plan.item_stride = plan.item_base + plan.item_width;
  plan.user_share_width = static_cast<int>(plan.user_terms.size());
  plan.row_width = static_cast<int>(row_columns.size());
  return absl::OkStatus();
}

// concat, and linear (whose cross the model folded into top[0], which reads concat(V)).
void PlanConcat(const Model& model, CpuPlan& plan, std::vector<int>& row_columns,
                std::vector<int>& user_columns) {
  std::vector<int> spec_offset(model.tables().size());
  int offset = plan.z_width;
  for (size_t t = 0; t < model.tables().size(); ++t) {
    spec_offset[t] = offset;
    offset += model.tables()[t].dim;
  }
  for (int t : model.item_tables()) {
    for (int j = 0; j < model.tables()[t].dim; ++j) row_columns.push_back(spec_offset[t] + j);
  }
  for (int t : model.user_tables()) {
    for (int j = 0; j < model.tables()[t].dim; ++j) user_columns.push_back(spec_offset[t] + j);
  }
  plan.items_in_row = true;
  plan.item_base = plan.z_width;
  plan.user_share_width = plan.user_width;
  plan.row_width = plan.z_width + plan.item_width;
}

// dcn: x0 = concat(V) is the activation row; every table's vector sits at its spec column.
absl::Status PlanDcn(const Model& model, CpuPlan& plan, std::vector<int>& row_columns) {
  std::vector<int> spec_offset(model.tables().size());
  int d0 = plan.z_width;
  for (size_t t = 0; t < model.tables().size(); ++t) {
    spec_offset[t] = d0;
    d0 += model.tables()[t].dim;
  }
  for (size_t i = 0; i < model.item_tables().size(); ++i) {
    plan.item_offset[i] = spec_offset[model.item_tables()[i]];
  }
  for (int t : model.user_tables()) plan.user_row_offset.push_back(spec_offset[t]);
  plan.items_in_row = true;
  plan.item_base = 0;
  plan.user_share_width = 0;
  plan.row_width = d0;
  row_columns.resize(d0);
  std::iota(row_columns.begin(), row_columns.end(), 0);
  plan.dcn_rank = model.spec().dcn.low_rank;
  plan.dcn_stride = std::max(8, (std::max(d0, plan.dcn_rank) + 7) / 8 * 8);
  for (size_t l = 0; l < model.dcn().size(); ++l) {
    const CrossLayer& layer = model.dcn()[l];
    const bool low_rank = plan.dcn_rank > 0;
    const std::vector<DenseLayer> chain = low_rank ? std::vector<DenseLayer>{layer.down, layer.up}
                                                   : std::vector<DenseLayer>{layer.up};
    const std::string what = absl::StrCat("dcn.", l, low_rank ? " (V, U)" : " (W)");
    if (absl::Status status = CheckLayers(chain, d0, what.c_str()); !status.ok()) return status;
    if (chain.back().out != d0) {
      return absl::InvalidArgumentError(absl::StrCat("dcn.", l, ": must output ", d0, " columns"));
    }
    PackedCross packed;
    packed.low_rank = low_rank;
    if (low_rank) packed.down = PackLayer(layer.down, /*relu=*/false);
    packed.up = PackLayer(layer.up, /*relu=*/false);
    plan.cross.push_back(std::move(packed));
  }
  return absl::OkStatus();
}

void PlanBottom(const Model& model, CpuPlan& plan) {
  const std::vector<DenseLayer>& bottom = model.bottom_mlp();
  std::vector<int> user_columns(plan.dense_user), item_columns(plan.dense_item);
  std::iota(user_columns.begin(), user_columns.end(), 0);
  std::iota(item_columns.begin(), item_columns.end(), plan.dense_user);
  plan.bottom_user = PackLayer(bottom[0], /*relu=*/false, &user_columns, /*with_bias=*/true);
  plan.bottom_item = PackLayer(bottom[0], /*relu=*/true, &item_columns, /*with_bias=*/false);
  for (size_t i = 1; i < bottom.size(); ++i) {
    plan.bottom_rest.push_back(PackLayer(bottom[i], /*relu=*/true));
  }
}

}  // namespace

absl::StatusOr<CpuPlan> BuildCpuPlan(const Model& model) {
  if (absl::Status status = CheckTables(model); !status.ok()) return status;
  const ModelSpec& spec = model.spec();
  CpuPlan plan;
  for (int t : model.user_tables()) {
    plan.user_offset.push_back(plan.user_width);
    plan.user_width += model.tables()[t].dim;
  }
  for (int t : model.item_tables()) {
    plan.item_offset.push_back(plan.item_width);
    plan.item_width += model.tables()[t].dim;
  }
  plan.dense_user = spec.dense_user;
  plan.dense_item = spec.dense_item;
  const int dense_total = plan.dense_user + plan.dense_item;
  plan.has_bottom = dense_total > 0 && !model.bottom_mlp().empty();
  if (plan.has_bottom) {
    if (absl::Status status = CheckLayers(model.bottom_mlp(), dense_total, "bottom_mlp");
        !status.ok()) {
      return status;
    }
    PlanBottom(model, plan);
  }
  plan.z_width = dense_total == 0  ? 0
                 : plan.has_bottom ? model.bottom_mlp().back().out
                                   : dense_total;

  std::vector<int> row_columns(plan.z_width), user_columns;
  std::iota(row_columns.begin(), row_columns.end(), 0);
  plan.dot = spec.interaction == Interaction::kDot;
  plan.dcn = spec.interaction == Interaction::kDcn;
  if (plan.dot) {
    if (absl::Status status = PlanDot(model, plan, row_columns, user_columns); !status.ok()) {
      return status;
    }
  } else if (plan.dcn) {
    if (absl::Status status = PlanDcn(model, plan, row_columns); !status.ok()) return status;
  } else {
    PlanConcat(model, plan, row_columns, user_columns);
  }
  plan.row_stride = std::max(8, (plan.row_width + 7) / 8 * 8);

  const std::vector<DenseLayer>& top = model.top_mlp();
  const int top_in = static_cast<int>(row_columns.size() + user_columns.size());
  if (top.empty() || top.back().out != 1) {
    return absl::InvalidArgumentError("top_mlp: must end in a layer of width 1");
  }
  if (absl::Status status = CheckLayers(top, top_in, "top_mlp"); !status.ok()) return status;
  plan.top.push_back(PackLayer(top[0], /*relu=*/top.size() > 1, &row_columns));
  plan.top_user = PackLayer(top[0], /*relu=*/false, &user_columns, /*with_bias=*/true);
  for (size_t i = 1; i < top.size(); ++i) {
    plan.top.push_back(PackLayer(top[i], /*relu=*/i + 1 < top.size()));
  }
  for (const DenseLayer& layer : model.bottom_mlp()) {
    plan.max_layer_width = std::max(plan.max_layer_width, layer.out);
  }
  for (const DenseLayer& layer : top) {
    plan.max_layer_width = std::max(plan.max_layer_width, layer.out);
  }
  return plan;
}

absl::StatusOr<CpuPlan> BuildCpuPlan(const Model& model, CpuPrecision precision) {
  absl::StatusOr<CpuPlan> plan = BuildCpuPlan(model);
  if (!plan.ok() || precision == CpuPrecision::kFp32) return plan;
  if (absl::Status available = Bf16KernelsAvailable(); !available.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("engine.cpu_precision: bf16: ", available.message()));
  }
  auto to_bf16 = [](PackedLayer& layer) {
    if (layer.out > 1) layer.weight_bf16 = PackedMatrixBf16::FromPacked(layer.weight);
  };
  if (plan->has_bottom) to_bf16(plan->bottom_item);
  for (PackedLayer& layer : plan->bottom_rest) to_bf16(layer);
  for (PackedLayer& layer : plan->top) to_bf16(layer);
  return plan;
}

}  // namespace fuserank::engine
