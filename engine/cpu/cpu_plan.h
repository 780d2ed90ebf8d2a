// How the CPU engine evaluates one model: the forward pass of SPEC section 2 split into
// a per-request share (user tables pooled once, user-only interaction terms, and the user
// columns of the first bottom and top layers folded into per-request biases) and a
// per-candidate share computed on one contiguous activation row per candidate.
// Built once per model; immutable and shared read-only by every worker thread.
#ifndef FUSERANK_ENGINE_CPU_CPU_PLAN_H_
#define FUSERANK_ENGINE_CPU_CPU_PLAN_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_interaction.h"
#include "engine/cpu/cpu_mlp.h"
#include "engine/model.h"

namespace fuserank::engine {

// One DCNv2 cross layer packed: low rank, down = V_l (no bias) then up = U_l with b_l;
// full rank, up = W_l with b_l alone (low_rank false, down unused).
struct PackedCross {
  bool low_rank = false;
  PackedLayer down;
  PackedLayer up;
};

struct CpuPlan {
  // Pooled user vectors of a request, side by side in Model::user_tables() order.
  std::vector<int> user_offset;
  int user_width = 0;
  // Pooled item vectors of a candidate, side by side in Model::item_tables() order at
  // item_base + item_offset[i] of the candidate's item block. concat / linear: the block
  // is the activation row (item_base = z_width). dot: a block of its own, item_stride
  // floats per candidate, holding the candidate's own vectors [z (copied), items], so
  // item_base = dot_dim with dense features, else 0.
  std::vector<int> item_offset;
  int item_width = 0;
  bool items_in_row = false;
  int item_base = 0;
  int item_stride = 0;

  int dense_user = 0;
  int dense_item = 0;
  // The activation row: [z (z_width floats) | per-candidate interaction]. With a bottom
  // MLP z is its output; without one z = x = user_dense ++ item_dense.
  int z_width = 0;
  int row_width = 0;
  int row_stride = 0;

  // Bottom MLP: layer 0 = bottom_user (user dense columns, with the bias; once per
  // request) + bottom_item (item dense columns, per candidate); then bottom_rest.
  bool has_bottom = false;
  PackedLayer bottom_user;
  PackedLayer bottom_item;
  std::vector<PackedLayer> bottom_rest;

  // Dot interaction. Per candidate, DotGramRows over the user vectors (shared) and the
  // candidate's own vectors writes the dots with a per-candidate vector to the
  // activation row at z_width (top[0]'s columns are permuted to match); the user-only
  // dots (user_terms, source 0 = the pooled user vectors) are the request's user share.
  bool dot = false;
  int dot_dim = 0;
  int own_vectors = 0;  // (z ? 1 : 0) + item tables
  std::vector<DotTerm> user_terms;

  // The request's user share of the first top layer's input: the pooled user vectors
  // (concat, linear) or the user-only dots; top_user (with the bias) maps it to the
  // request's bias for top[0], which reads the activation row.
  int user_share_width = 0;
  PackedLayer top_user;
  std::vector<PackedLayer> top;

  // DCN interaction. The activation row is x0 = concat(V) in spec order (row_width = d0):
  // z, item vectors looked up into their columns (item_base 0, item_offset in the row),
  // and the request's pooled user vectors copied to user_row_offset[u]. The cross layers
  // run on it; top[0] reads x_L whole (user_share_width 0: top_user is top[0]'s bias).
  bool dcn = false;
  std::vector<int> user_row_offset;
  std::vector<PackedCross> cross;
  int dcn_rank = 0;
  int dcn_stride = 0;  // row stride of the x_l and V_l x_l blocks

  int max_layer_width = 0;  // widest bottom or top layer output
};

// Checks the model's shapes against its spec and builds the plan; INVALID_ARGUMENT
// (naming the layer or table) for inconsistent shapes.
absl::StatusOr<CpuPlan> BuildCpuPlan(const Model& model);

// The plan at `precision`: with kBf16 every per-candidate layer of more than one output
// (bottom_item, bottom_rest, top but a 1-wide last layer) also gets its bf16 weights; the
// once-per-request layers stay fp32. FAILED_PRECONDITION when this CPU cannot run bf16
// (Bf16KernelsAvailable).
absl::StatusOr<CpuPlan> BuildCpuPlan(const Model& model, CpuPrecision precision);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_PLAN_H_
