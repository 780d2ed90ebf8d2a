// The engine's batch layout: one or more requests, their candidates and every bag of
// ids already mapped to rows, in flat CSR arrays that a backend reads directly (and the
// CUDA backend copies to the device in one transfer). Offsets are 32-bit: whoever builds a
// batch keeps it within the id and candidate budgets (engine.max_batch_ids,
// engine.max_batch_candidates), and Append() aborts rather than wrap. A Batch is owned by
// one thread at a time; Clear() keeps capacity so a reused Batch does not allocate after
// warm-up.
#ifndef FUSERANK_ENGINE_BATCH_H_
#define FUSERANK_ENGINE_BATCH_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/model.h"

namespace fuserank::engine {

// Bags: user bag (r, u) is r * U + u, where u indexes Model::user_tables(); item bag
// (c, i) is c * I + i, where c is the candidate's position in the whole batch and i
// indexes Model::item_tables(). Bag b's ids are rows[bag_begin[b] .. bag_begin[b + 1]),
// each with a weight (1 when the request sent none).
struct BagSet {
  std::vector<uint32_t> bag_begin{0};  // bags + 1 entries
  std::vector<int32_t> rows;           // row indices, already oov-mapped
  std::vector<float> weights;          // one per row
  // The raw ids, one per row, when the model has a storage: redis table (whose rows[i] are
  // 0 until the backend stages the batch's remote rows); empty otherwise.
  std::vector<int64_t> keys;

  size_t num_bags() const { return bag_begin.size() - 1; }
  size_t capacity_bytes() const {
    return bag_begin.capacity() * sizeof(uint32_t) + rows.capacity() * sizeof(int32_t) +
           weights.capacity() * sizeof(float) + keys.capacity() * sizeof(int64_t);
  }
  void Clear() {
    bag_begin.assign(1, 0);
    rows.clear();
    weights.clear();
    keys.clear();
  }
};

struct Batch {
  std::shared_ptr<const Model> model;
  std::vector<uint32_t> candidate_begin{0};  // requests + 1 entries
  std::vector<uint32_t> top_k;               // per request, in 1..count (count when all)
  BagSet user;                               // requests x U bags
  BagSet item;                               // candidates x I bags
  std::vector<float> user_dense;             // requests x dense_user
  std::vector<float> item_dense;             // candidates x dense_item
  // The latest of its requests' deadlines (max(): none), set by the Batcher as it runs the
  // batch: past it no request can use the answer, so a backend stops waiting for the
  // cluster then (RemoteTier::Stage). Append() leaves it; Clear() resets it.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();

  int num_requests() const { return static_cast<int>(candidate_begin.size()) - 1; }
  int num_candidates() const { return static_cast<int>(candidate_begin.back()); }
  // Heap bytes the batch holds, used or not (what pooling it keeps alive).
  size_t capacity_bytes() const;
  void Clear();
  // Appends every request of `other` (same model) after this batch's requests.
  void Append(const Batch& other);
};

struct ScoredIndex {
  uint32_t index = 0;  // the candidate's position within its request
  float score = 0.0f;
};

// Seconds spent per engine stage on one batch (0 where a backend cannot separate them).
struct StageTimes {
  double lookup = 0;
  double cross = 0;
  double dnn = 0;
  double topk = 0;
  // False when the backend did not time this batch's stages (the CUDA backend times them
  // on a sampled share of its graph replays): the four figures are then not recorded.
  bool timed = true;
};

// Per request r: its top-K items, best first, at items[result_begin[r] .. result_begin[r+1]).
struct BatchResult {
  std::vector<uint32_t> result_begin{0};
  std::vector<ScoredIndex> items;
  StageTimes stages;
  // CUDA: graph captures that failed during this batch (it was still scored, eagerly).
  uint32_t graph_capture_failures = 0;
  // Per request, when some request failed on its own (a storage: redis table's rows could
  // not be fetched, remote.on_remote_error: fail): its status; empty when none did.
  std::vector<absl::Status> request_errors;

  void Clear() {
    result_begin.assign(1, 0);
    items.clear();
    stages = {};
    graph_capture_failures = 0;
    request_errors.clear();
  }
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_BATCH_H_
