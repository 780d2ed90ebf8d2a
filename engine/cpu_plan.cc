#include "engine/cpu_plan.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"

namespace fuserank::engine {
namespace {

size_t ElementBytes(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

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
    if (table.dtype == DType::kInt8) {
      return absl::UnimplementedError(
          absl::StrCat("table '", table.name, "': int8 tables are not supported on the CPU"));
    }
    if (table.dim <= 0 || table.rows <= 0 || table.data == nullptr ||
        table.row_bytes < table.dim * ElementBytes(table.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("table '", table.name,
                                                     "': bad shape or storage for the CPU"));
    }
  }
  return absl::OkStatus();
}

// The activation-row and user-share columns of top[0] for the dot interaction.
absl::Status PlanDot(const Model& model, CpuPlan& plan, std::vector<int>& row_columns,
                     std::vector<int>& user_columns) {
  struct Vec {
    int source;
    int offset;
  };
  std::vector<Vec> v;  // V = [z, e_1 .. e_T]
  if (plan.z_width > 0) v.push_back({kSourceRow, 0});
  std::vector<int> user_pos(model.tables().size(), -1), item_pos(model.tables().size(), -1);
  for (size_t u = 0; u < model.user_tables().size(); ++u) user_pos[model.user_tables()[u]] = u;
  for (size_t i = 0; i < model.item_tables().size(); ++i) item_pos[model.item_tables()[i]] = i;
  plan.dot_dim = plan.z_width > 0 ? plan.z_width
                                  : (model.tables().empty() ? 0 : model.tables()[0].dim);
  for (size_t t = 0; t < model.tables().size(); ++t) {
    if (model.tables()[t].dim != plan.dot_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "interaction dot: table '", model.tables()[t].name, "' has dim ",
          model.tables()[t].dim, ", other vectors have ", plan.dot_dim));
    }
    v.push_back(user_pos[t] >= 0 ? Vec{kSourceUser, plan.user_offset[user_pos[t]]}
                                 : Vec{kSourceItem, plan.item_offset[item_pos[t]]});
  }
  int p = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    for (size_t j = 0; j < i; ++j, ++p) {
      const DotTerm term{v[i].source, v[i].offset, v[j].source, v[j].offset};
      if (v[i].source == kSourceUser && v[j].source == kSourceUser) {
        plan.user_terms.push_back(term);
        user_columns.push_back(plan.z_width + p);
      } else {
        plan.item_terms.push_back(term);
        row_columns.push_back(plan.z_width + p);
      }
    }
  }
  plan.user_share_width = static_cast<int>(plan.user_terms.size());
  plan.row_width = plan.z_width + static_cast<int>(plan.item_terms.size());
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
  plan.item_row_offset = plan.z_width;
  plan.user_share_width = plan.user_width;
  plan.row_width = plan.z_width + plan.item_width;
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
  plan.z_width = dense_total == 0 ? 0
                 : plan.has_bottom ? model.bottom_mlp().back().out
                                   : dense_total;

  std::vector<int> row_columns(plan.z_width), user_columns;
  std::iota(row_columns.begin(), row_columns.end(), 0);
  plan.dot = spec.interaction == Interaction::kDot;
  if (plan.dot) {
    if (absl::Status status = PlanDot(model, plan, row_columns, user_columns); !status.ok()) {
      return status;
    }
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

}  // namespace fuserank::engine
