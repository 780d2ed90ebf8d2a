#include "engine/cpu/cpu_forward.h"

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "engine/cpu/cpu_interaction.h"
#include "engine/cpu/cpu_lookup.h"
#include "engine/cpu/cpu_mlp.h"
#include "engine/remote_stage.h"

namespace fuserank::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

struct ShareLayout {
  int user_dots;
  int top_bias;
  int bottom_bias;
  int width;
};

ShareLayout Layout(const CpuPlan& plan) {
  ShareLayout layout;
  layout.user_dots = plan.user_width;
  layout.top_bias = layout.user_dots + (plan.dot ? plan.user_share_width : 0);
  layout.bottom_bias = layout.top_bias + plan.top[0].out;
  layout.width = layout.bottom_bias + (plan.has_bottom ? plan.bottom_user.out : 0);
  return layout;
}

// Runs `first` (with `first_bias`) then `rest` on `count` rows; the last layer writes
// to `out`, the others to the scratch ping-pong blocks.
void RunChain(const PackedLayer& first, const float* first_bias, const PackedLayer* rest,
              int num_rest, int count, const float* in, int in_stride, float* out, int out_stride,
              TileScratch* scratch, int width) {
  float* blocks[2] = {scratch->ping.data(), scratch->pong.data()};
  const float* x = in;
  int x_stride = in_stride;
  for (int l = 0; l <= num_rest; ++l) {
    const bool last = l == num_rest;
    float* y = last ? out : blocks[l % 2];
    const int y_stride = last ? out_stride : width;
    const PackedLayer& layer = l == 0 ? first : rest[l - 1];
    LayerForward(layer, count, x, x_stride, y, y_stride, l == 0 ? first_bias : nullptr);
    x = y;
    x_stride = y_stride;
  }
}

// dcn: the request's pooled user vectors (share) into every candidate's x0 row.
void CopyUserVectors(const CpuPlan& plan, const Model& model, const float* share, int count,
                     float* row) {
  for (size_t u = 0; u < plan.user_row_offset.size(); ++u) {
    const float* from = share + plan.user_offset[u];
    const int dim = model.tables()[model.user_tables()[u]].dim;
    for (int c = 0; c < count; ++c) {
      std::copy(from, from + dim,
                row + static_cast<size_t>(c) * plan.row_stride + plan.user_row_offset[u]);
    }
  }
}

// dcn: x_{l+1} = x0 * (U_l (V_l x_l) + b_l) + x_l, or W_l x_l for full rank, on `count`
// x0 rows; the product, residual and saturation are the epilogue of the GEMM that writes
// x_{l+1}. Returns x_L (stride plan.dcn_stride).
const float* CrossChain(const CpuPlan& plan, int count, const float* x0, TileScratch* scratch) {
  const int stride = plan.dcn_stride;
  float* blocks[2] = {scratch->cross_a.data(), scratch->cross_b.data()};
  const float* x = x0;
  int x_stride = plan.row_stride;
  for (size_t l = 0; l < plan.cross.size(); ++l) {
    const PackedCross& layer = plan.cross[l];
    const CrossEpilogue epilogue{x0, plan.row_stride, x, x_stride};
    float* y;
    if (layer.low_rank) {  // A = V_l x_l, so x_{l+1} may replace x_l in place
      LayerForward(layer.down, count, x, x_stride, scratch->cross_t.data(), stride);
      y = blocks[0];
      CrossLayerForward(layer.up, count, scratch->cross_t.data(), stride, epilogue, y, stride);
    } else {  // A = x_l: write the other block
      y = blocks[l % 2];
      CrossLayerForward(layer.up, count, x, x_stride, epilogue, y, stride);
    }
    x = y;
    x_stride = stride;
  }
  return x;
}

// The hot tier of table `t` (spec index) for this thread, or null when there is none.
const HotLookup* HotFor(TileScratch* scratch, int t, HotLookup* storage) {
  HotReads& hot = scratch->hot;
  if (hot.snapshot == nullptr) return nullptr;
  if (scratch->remote != nullptr && scratch->remote->staged(t) != nullptr) return nullptr;
  *storage = {&hot.snapshot->table(t), hot.sampler.get(), t, &hot.hits[t], &hot.misses[t]};
  return storage;
}

// Table t as this batch reads it, with the rows of its side's bags: a storage: redis
// table's staged copy and the staged rows (remote_stage.h), else the model's own.
struct TableRead {
  const EmbeddingTable* table;
  const int32_t* rows;
};
TableRead ReadOf(const Model& model, const BagSet& bags, const TileScratch& scratch, int t) {
  if (scratch.remote != nullptr) {
    const bool user = model.tables()[t].side == Side::kUser;
    const int32_t* rows = user ? scratch.remote->user_rows() : scratch.remote->item_rows();
    const EmbeddingTable* staged = scratch.remote->staged(t);
    return {staged != nullptr ? staged : &model.tables()[t], rows};
  }
  return {&model.tables()[t], bags.rows.data()};
}

}  // namespace

int RequestShareWidth(const CpuPlan& plan) { return Layout(plan).width; }

void ComputeRequestShare(const CpuPlan& plan, const Model& model, const Batch& batch, int r,
                         float* share, TileScratch* scratch) {
  const ShareLayout layout = Layout(plan);
  const Clock::time_point t0 = Clock::now();
  const int num_user = static_cast<int>(model.user_tables().size());
  HotLookup hot;
  for (int u = 0; u < num_user; ++u) {
    const int t = model.user_tables()[u];
    const TableRead read = ReadOf(model, batch.user, *scratch, t);
    PooledLookup(*read.table, batch.user.bag_begin.data(), read.rows, batch.user.weights.data(),
                 r * num_user + u, 1, 1, share + plan.user_offset[u], 0, HotFor(scratch, t, &hot));
  }
  SaturateNonFinite(share, 1, plan.user_width, plan.user_width);
  const Clock::time_point t1 = Clock::now();
  if (plan.dot) {
    const float* sources[1] = {share};
    const int strides[1] = {0};
    DotTerms(plan.user_terms.data(), static_cast<int>(plan.user_terms.size()), plan.dot_dim, 1,
             sources, strides, share + layout.user_dots, 0);
    SaturateNonFinite(share + layout.user_dots, 1, plan.user_share_width, plan.user_share_width);
  }
  const Clock::time_point t2 = Clock::now();
  const float* user_share = plan.dot ? share + layout.user_dots : share;
  LayerForward(plan.top_user, 1, user_share, plan.user_share_width, share + layout.top_bias,
               plan.top_user.out);
  if (plan.has_bottom) {
    LayerForward(plan.bottom_user, 1,
                 batch.user_dense.data() + static_cast<size_t>(r) * plan.dense_user,
                 plan.dense_user, share + layout.bottom_bias, plan.bottom_user.out);
  }
  const Clock::time_point t3 = Clock::now();
  StageTimes& times = scratch->times;
  times.lookup += Seconds(t0, t1);
  times.cross += Seconds(t1, t2);
  times.dnn += Seconds(t2, t3);
}

void TileScratch::Prepare(const CpuPlan& plan) {
  row.resize(static_cast<size_t>(kTileCandidates) * plan.row_stride);
  items.resize(plan.items_in_row ? 0 : static_cast<size_t>(kTileCandidates) * plan.item_stride);
  ping.resize(static_cast<size_t>(kTileCandidates) * plan.max_layer_width);
  pong.resize(static_cast<size_t>(kTileCandidates) * plan.max_layer_width);
  logits.resize(kTileCandidates);
  const size_t cross = plan.dcn ? static_cast<size_t>(kTileCandidates) * plan.dcn_stride : 0;
  cross_a.resize(cross);
  cross_b.resize(plan.dcn && plan.dcn_rank == 0 ? cross : 0);
  cross_t.resize(plan.dcn && plan.dcn_rank > 0 ? cross : 0);
  const int user_vectors = static_cast<int>(plan.user_offset.size());
  dots.resize(plan.dot ? DotGramScratchFloats(user_vectors, plan.own_vectors, plan.dot_dim) : 0);
}

void ScoreTile(const CpuPlan& plan, const Model& model, const Batch& batch, int r, int first,
               int count, const float* share, TileScratch* scratch, float* scores) {
  const ShareLayout layout = Layout(plan);
  const Clock::time_point t0 = Clock::now();
  float* row = scratch->row.data();
  const int row_stride = plan.row_stride;
  float* items = plan.items_in_row ? row : scratch->items.data();
  const int items_stride = plan.items_in_row ? row_stride : plan.item_stride;
  const int num_item = static_cast<int>(model.item_tables().size());
  HotLookup hot;
  for (int i = 0; i < num_item; ++i) {
    const int t = model.item_tables()[i];
    const TableRead read = ReadOf(model, batch.item, *scratch, t);
    PooledLookup(*read.table, batch.item.bag_begin.data(), read.rows, batch.item.weights.data(),
                 first * num_item + i, num_item, count,
                 items + plan.item_base + plan.item_offset[i], items_stride,
                 HotFor(scratch, t, &hot));
  }
  if (plan.dcn) {  // the item vectors are spread over the row among the user ones
    CopyUserVectors(plan, model, share, count, row);
    SaturateNonFinite(row, count, plan.row_width, row_stride);
  } else {
    SaturateNonFinite(items + plan.item_base, count, plan.item_width, items_stride);
  }
  const Clock::time_point t1 = Clock::now();
  if (plan.has_bottom) {
    RunChain(plan.bottom_item, share + layout.bottom_bias, plan.bottom_rest.data(),
             static_cast<int>(plan.bottom_rest.size()), count,
             batch.item_dense.data() + static_cast<size_t>(first) * plan.dense_item,
             plan.dense_item, row, row_stride, scratch, plan.max_layer_width);
  } else if (plan.z_width > 0) {  // z = x = user_dense ++ item_dense
    const float* user_dense = batch.user_dense.data() + static_cast<size_t>(r) * plan.dense_user;
    for (int c = 0; c < count; ++c) {
      float* z = row + static_cast<size_t>(c) * row_stride;
      std::copy(user_dense, user_dense + plan.dense_user, z);
      const float* item_dense =
          batch.item_dense.data() + static_cast<size_t>(first + c) * plan.dense_item;
      std::copy(item_dense, item_dense + plan.dense_item, z + plan.dense_user);
    }
  }
  const Clock::time_point t2 = Clock::now();
  if (plan.dot) {
    if (plan.item_base > 0) {  // z is the first own vector
      for (int c = 0; c < count; ++c) {
        std::copy(row + static_cast<size_t>(c) * row_stride,
                  row + static_cast<size_t>(c) * row_stride + plan.z_width,
                  items + static_cast<size_t>(c) * items_stride);
      }
    }
    DotGramRows(share, static_cast<int>(model.user_tables().size()), items, plan.own_vectors,
                items_stride, plan.dot_dim, count, row + plan.z_width, row_stride, &scratch->dots);
    SaturateNonFinite(row + plan.z_width, count, plan.row_width - plan.z_width, row_stride);
  }
  const float* h = row;
  int h_stride = row_stride;
  if (plan.dcn) {
    h = CrossChain(plan, count, row, scratch);
    h_stride = plan.dcn_stride;
  }
  const Clock::time_point t3 = Clock::now();
  RunChain(plan.top[0], share + layout.top_bias, plan.top.data() + 1,
           static_cast<int>(plan.top.size()) - 1, count, h, h_stride, scratch->logits.data(), 1,
           scratch, plan.max_layer_width);
  Sigmoid(scratch->logits.data(), count, 1, scores + first);
  const Clock::time_point t4 = Clock::now();
  scratch->times.lookup += Seconds(t0, t1);
  scratch->times.dnn += Seconds(t1, t2) + Seconds(t3, t4);
  scratch->times.cross += Seconds(t2, t3);
}

}  // namespace fuserank::engine
