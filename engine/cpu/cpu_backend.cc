// The CPU backend: scores a Batch with the CpuPlan of its model (per
// request the user share, then tiles of candidates) on the worker's reused scratch, and
// selects each request's top-K. With cpu_threads > 1 a worker splits a batch over its
// own thread pool: whole requests per thread when there are many, else the tiles of a
// few large requests; stage seconds are then per-thread averages. With a HotRowManager
// (BackendOptions::hot_rows) a batch reads rows through the snapshot current when it
// starts, and its per-table hits and misses reach the manager once, at its end.
#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/check.h"
#include "engine/cpu/cpu_forward.h"
#include "engine/cpu/cpu_plan.h"
#include "engine/cpu/cpu_thread_pool.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "engine/remote_stage.h"
#include "engine/remote_tier.h"
#include "engine/topk.h"

namespace fuserank::engine {
namespace {

using Clock = std::chrono::steady_clock;

// Requests per batch that the per-request buffers are sized for at construction.
constexpr size_t kReservedRequests = 64;
// Sampled row accesses one thread buffers per table between flushes (once per batch).
constexpr int kSamplerBufferRows = 1024;

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const Model> model, const BackendOptions& options)
      : model_(std::move(model)),
        plan_(BuildCpuPlan(*model_, options.cpu_precision)),
        hot_rows_(options.hot_rows),
        sample_accesses_(options.sample_accesses && options.hot_rows != nullptr),
        remote_(options.remote) {
    if (model_->spec().has_remote_tables() &&
        (remote_ == nullptr || &remote_->model() != model_.get())) {
      remote_status_ = absl::FailedPreconditionError(
          "cpu backend: the model has storage: redis tables but no remote tier of its own");
    }
    if (hot_rows_ != nullptr && &hot_rows_->model() != model_.get()) {
      hot_status_ =
          absl::InvalidArgumentError("cpu backend: the hot-row manager belongs to another model");
      hot_rows_ = nullptr;
      sample_accesses_ = false;
    }
    const int threads = std::max(1, options.cpu_threads);
    const size_t tables = model_->tables().size();
    for (int w = 0; w < std::max(1, options.workers); ++w) {
      auto worker = std::make_unique<Worker>();
      worker->pool = std::make_unique<CpuThreadPool>(threads, options.worker_nice);
      worker->scratch.resize(threads);
      if (hot_rows_ != nullptr) {
        for (int t = 0; t < threads; ++t) {
          HotReads& hot = worker->scratch[t].hot;
          hot.hits.assign(tables, 0);
          hot.misses.assign(tables, 0);
          if (options.sample_accesses) {
            hot.sampler = std::make_unique<AccessSampler>(
                hot_rows_, kSamplerBufferRows, static_cast<uint64_t>(w) * threads + t + 1);
          }
        }
      }
      if (plan_.ok()) {  // sized for a full batch up front: Run() allocates at most once
        for (TileScratch& scratch : worker->scratch) scratch.Prepare(*plan_);
        const size_t candidates = std::max(1, options.max_batch_candidates);
        worker->scores.reserve(candidates);
        worker->tiles.reserve(candidates / kTileCandidates + kReservedRequests);
        worker->shares.reserve(kReservedRequests * RequestShareWidth(*plan_));
      }
      workers_.push_back(std::move(worker));
    }
  }

  std::string device() const override { return "cpu"; }
  int num_workers() const override { return static_cast<int>(workers_.size()); }
  absl::Status Run(int worker, const Batch& batch, BatchResult* result) override;

 private:
  struct Tile {
    int request;
    int first;
    int count;
  };
  // Everything one Run() touches besides the model: reused from call to call.
  struct Worker {
    std::unique_ptr<CpuThreadPool> pool;
    std::vector<TileScratch> scratch;  // one per pool thread
    std::vector<float> shares;         // requests x RequestShareWidth
    std::vector<float> scores;         // candidates
    std::vector<Tile> tiles;
    RemoteStage remote;  // the batch's storage: redis rows
  };

  // Scores every candidate into w.scores; returns the number of threads that shared it.
  int Score(Worker& w, const Batch& batch);
  void SelectTopK(Worker& w, const Batch& batch, BatchResult* result);
  // Hands the batch's hit/miss tallies and access samples to hot_rows_, and lets go of
  // the snapshot.
  void FinishHotReads(Worker& w);

  std::shared_ptr<const Model> model_;
  absl::StatusOr<CpuPlan> plan_;
  HotRowManager* hot_rows_;  // null: no hot-row tier
  bool sample_accesses_;     // BackendOptions::sample_accesses, with a hot-row tier
  absl::Status hot_status_;
  RemoteTier* remote_;  // null: no storage: redis table
  absl::Status remote_status_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

absl::Status CpuBackend::Run(int worker, const Batch& batch, BatchResult* result) {
  if (worker < 0 || worker >= num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("cpu backend: no worker ", worker));
  }
  if (!plan_.ok()) return plan_.status();
  if (!hot_status_.ok()) return hot_status_;
  if (!remote_status_.ok()) return remote_status_;
  if (batch.model != nullptr && batch.model != model_) {
    return absl::InvalidArgumentError("cpu backend: batch is for another model");
  }
  // The batch passed ValidateBatch() where it entered the engine (batch_validation.h): no
  // id is walked again; only sizes, which cost nothing, are checked here.
  FUSERANK_CHECK(batch.top_k.size() == static_cast<size_t>(batch.num_requests()) &&
                 batch.item_dense.size() ==
                     static_cast<size_t>(batch.num_candidates()) * model_->spec().dense_item)
      << "cpu backend: the batch was not validated";
  Worker& w = *workers_[worker];
  result->Clear();
  // One snapshot for the whole batch: a swap meanwhile takes effect at the next batch.
  std::shared_ptr<const HotRowSnapshot> snapshot;
  if (hot_rows_ != nullptr) snapshot = hot_rows_->snapshot();
  double staging = 0;
  if (model_->spec().has_remote_tables()) {
    const Clock::time_point start = Clock::now();
    const int period = sample_accesses_ ? hot_rows_->options().sample_period : 0;
    remote_->Stage(batch, snapshot.get(), period, &w.remote, &result->request_errors);
    staging = std::chrono::duration<double>(Clock::now() - start).count();
  }
  for (TileScratch& scratch : w.scratch) {
    scratch.times = {};
    scratch.hot.snapshot = snapshot.get();
    scratch.remote = model_->spec().has_remote_tables() ? &w.remote : nullptr;
  }
  const double threads = Score(w, batch);
  if (hot_rows_ != nullptr) FinishHotReads(w);
  SelectTopK(w, batch, result);
  // Per-thread seconds, averaged over the threads that shared the batch.
  for (const TileScratch& scratch : w.scratch) {
    result->stages.lookup += scratch.times.lookup;
    result->stages.cross += scratch.times.cross;
    result->stages.dnn += scratch.times.dnn;
  }
  if (threads > 1) {
    result->stages.lookup /= threads;
    result->stages.cross /= threads;
    result->stages.dnn /= threads;
  }
  result->stages.lookup += staging;  // the remote fetch is part of the lookup
  return absl::OkStatus();
}

int CpuBackend::Score(Worker& w, const Batch& batch) {
  const CpuPlan& plan = *plan_;
  const int requests = batch.num_requests();
  const size_t share_width = RequestShareWidth(plan);
  if (w.shares.size() < requests * share_width) w.shares.resize(requests * share_width);
  if (w.scores.size() < static_cast<size_t>(batch.num_candidates())) {
    w.scores.resize(batch.num_candidates());
  }
  auto share = [&](int r) { return w.shares.data() + r * share_width; };
  auto score_request = [&](int thread, int r) {
    ComputeRequestShare(plan, *model_, batch, r, share(r), &w.scratch[thread]);
    for (uint32_t c = batch.candidate_begin[r]; c < batch.candidate_begin[r + 1];
         c += kTileCandidates) {
      const int count = std::min<int>(kTileCandidates, batch.candidate_begin[r + 1] - c);
      ScoreTile(plan, *model_, batch, r, static_cast<int>(c), count, share(r), &w.scratch[thread],
                w.scores.data());
    }
  };
  const int threads = w.pool->threads();
  if (threads == 1 || requests >= 2 * threads) {  // whole requests per thread
    w.pool->ParallelFor(requests, score_request);
    return std::min(threads, requests);
  }
  // Few large requests: the user shares first, then their tiles spread over threads.
  w.tiles.clear();
  for (int r = 0; r < requests; ++r) {
    ComputeRequestShare(plan, *model_, batch, r, share(r), &w.scratch[0]);
    for (uint32_t c = batch.candidate_begin[r]; c < batch.candidate_begin[r + 1];
         c += kTileCandidates) {
      const int count = std::min<int>(kTileCandidates, batch.candidate_begin[r + 1] - c);
      w.tiles.push_back({r, static_cast<int>(c), count});
    }
  }
  w.pool->ParallelFor(static_cast<int>(w.tiles.size()), [&](int thread, int i) {
    const Tile& tile = w.tiles[i];
    ScoreTile(plan, *model_, batch, tile.request, tile.first, tile.count, share(tile.request),
              &w.scratch[thread], w.scores.data());
  });
  return std::min<int>(threads, std::max<size_t>(1, w.tiles.size()));
}

void CpuBackend::FinishHotReads(Worker& w) {
  const int tables = static_cast<int>(model_->tables().size());
  for (int t = 0; t < tables; ++t) {
    uint64_t hits = 0;
    uint64_t misses = 0;
    for (TileScratch& scratch : w.scratch) {
      hits += std::exchange(scratch.hot.hits[t], 0);
      misses += std::exchange(scratch.hot.misses[t], 0);
    }
    if (model_->tables()[t].remote) {  // looked up in the hot set while staging
      hits += w.remote.hot_hits(t);
      misses += w.remote.hot_misses(t);
      if (sample_accesses_) hot_rows_->ObserveIds(t, w.remote.sampled(t));
    }
    hot_rows_->RecordLookups(t, hits, misses);
  }
  for (TileScratch& scratch : w.scratch) {
    if (scratch.hot.sampler != nullptr) scratch.hot.sampler->Flush();
    scratch.hot.snapshot = nullptr;
  }
}

void CpuBackend::SelectTopK(Worker& w, const Batch& batch, BatchResult* result) {
  const Clock::time_point start = Clock::now();
  const int requests = batch.num_requests();
  size_t total = 0;
  for (int r = 0; r < requests; ++r) {
    // Unsigned: a top_k past INT_MAX must not turn negative (ValidateBatch refuses it).
    const uint32_t count = batch.candidate_begin[r + 1] - batch.candidate_begin[r];
    const uint32_t k = batch.top_k[r] == 0 ? count : std::min(batch.top_k[r], count);
    total += k;
    result->result_begin.push_back(static_cast<uint32_t>(total));
  }
  result->items.resize(total);
  for (int r = 0; r < requests; ++r) {
    const uint32_t first = batch.candidate_begin[r];
    TopK(w.scores.data() + first, static_cast<int>(batch.candidate_begin[r + 1] - first),
         static_cast<int>(result->result_begin[r + 1] - result->result_begin[r]),
         result->items.data() + result->result_begin[r]);
  }
  result->stages.topk = std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(std::shared_ptr<const Model> model,
                                          const BackendOptions& options) {
  return std::make_unique<CpuBackend>(std::move(model), options);
}

}  // namespace fuserank::engine
