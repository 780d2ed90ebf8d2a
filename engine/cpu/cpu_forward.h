// The CPU engine's forward pass over a CpuPlan: once per request the user share
// (ComputeRequestShare), then per tile of up to kTileCandidates candidates of that
// request the scores (ScoreTile), on scratch blocks that are sized once and reused.
// Every stage's output is saturated to finite values (SaturateNonFinite, cpu_mlp.h), so
// every score is in [0, 1] for any finite input.
// A TileScratch belongs to one thread; the plan, model and batch are only read.
#ifndef FUSERANK_ENGINE_CPU_CPU_FORWARD_H_
#define FUSERANK_ENGINE_CPU_CPU_FORWARD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/batch.h"
#include "engine/cpu/cpu_plan.h"
#include "engine/hot_rows/access_sampler.h"
#include "engine/hot_rows/hot_rows.h"
#include "engine/model.h"

namespace fuserank::engine {

class RemoteStage;

// Candidates scored together: their activation rows and layer outputs stay in L2.
inline constexpr int kTileCandidates = 64;

// Floats of one request's share: [pooled user vectors | user-only dots | top[0] bias |
// bottom layer 0 bias].
int RequestShareWidth(const CpuPlan& plan);

// One thread's view of the hot-row tier for a batch: the snapshot to read rows through
// (null: no hot sets), an optional access sampler, and per-table hit/miss tallies that the
// backend hands to the HotRowManager once per batch.
struct HotReads {
  const HotRowSnapshot* snapshot = nullptr;
  std::unique_ptr<AccessSampler> sampler;  // cache.policy: frequency
  std::vector<uint64_t> hits;              // per table, spec order
  std::vector<uint64_t> misses;
};

struct TileScratch {
  std::vector<float> row;    // kTileCandidates x plan.row_stride
  std::vector<float> items;  // kTileCandidates x plan.item_width (dot only)
  std::vector<float> ping;   // kTileCandidates x plan.max_layer_width
  std::vector<float> pong;
  std::vector<float> logits;  // kTileCandidates
  // dcn only: x_l ping-pong blocks and V_l x_l, kTileCandidates x plan.dcn_stride each.
  std::vector<float> cross_a;
  std::vector<float> cross_b;
  std::vector<float> cross_t;
  std::vector<float> dots;  // dot only: DotGramRows' scratch
  StageTimes times;
  HotReads hot;
  // The batch's staged storage: redis rows (null: the model has no remote table).
  const RemoteStage* remote = nullptr;

  // Sizes the blocks for `plan` (allocates only the first time for a plan).
  void Prepare(const CpuPlan& plan);
};

// Fills request r's share (RequestShareWidth floats at `share`). Adds the seconds spent
// to scratch->times (lookup, cross and dnn) and reads user rows through scratch->hot.
void ComputeRequestShare(const CpuPlan& plan, const Model& model, const Batch& batch, int r,
                         float* share, TileScratch* scratch);

// Scores candidates [first, first + count) of the batch (batch-wide positions; all of
// request r; count <= kTileCandidates) with the request's `share` and writes their
// sigmoid scores to scores[first .. first + count). Stage seconds go to scratch->times.
// REQUIRES: scratch->Prepare(plan) was called.
void ScoreTile(const CpuPlan& plan, const Model& model, const Batch& batch, int r, int first,
               int count, const float* share, TileScratch* scratch, float* scores);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_FORWARD_H_
