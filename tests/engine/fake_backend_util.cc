#include "tests/engine/fake_backend_util.h"

#include <algorithm>
#include <utility>

#include "engine/thread_priority.h"
#include "gtest/gtest.h"

namespace fuserank::engine::test {

absl::Status FakeBackend::Run(int worker, const Batch& batch, BatchResult* result) {
  {
    absl::MutexLock lock(&mu_);
    EXPECT_TRUE(busy_workers_.insert(worker).second) << "two runs on worker " << worker;
    ++running_;
    max_running_ = std::max(max_running_, running_);
    runs_.push_back({batch.num_requests(), batch.num_candidates(), batch.model.get(),
                     CurrentThreadNice(), batch.deadline});
    const bool hold = gated_ || (!batch.item_dense.empty() && batch.item_dense[0] == kHold);
    auto open = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !hold || open_; };
    mu_.Await(absl::Condition(&open));
  }
  absl::Status status = fail_ ? absl::InternalError("backend broke") : absl::OkStatus();
  for (int r = 0; r < batch.num_requests() && status.ok(); ++r) {
    const uint32_t begin = batch.candidate_begin[r];
    const uint32_t end = batch.candidate_begin[r + 1];
    std::vector<ScoredIndex> items;
    for (uint32_t c = begin; c < end; ++c) items.push_back({c - begin, batch.item_dense[c]});
    std::stable_sort(items.begin(), items.end(),
                     [](const ScoredIndex& a, const ScoredIndex& b) { return a.score > b.score; });
    items.resize(batch.top_k[r]);
    result->items.insert(result->items.end(), items.begin(), items.end());
    result->result_begin.push_back(static_cast<uint32_t>(result->items.size()));
  }
  if (malformed_) result->result_begin.pop_back();
  result->stages.dnn = 0.5;
  absl::MutexLock lock(&mu_);
  busy_workers_.erase(worker);
  --running_;
  return status;
}

const std::shared_ptr<const Model>& DefaultModel() {
  static const std::shared_ptr<const Model>* const model =
      new std::shared_ptr<const Model>(DenseScoreModel());
  return *model;
}

std::unique_ptr<Batch> MakeRequest(Batcher* batcher, const std::vector<float>& scores,
                                   uint32_t top_k, std::shared_ptr<const Model> model) {
  std::unique_ptr<Batch> batch = batcher->AcquireBatch();
  batch->model = model != nullptr ? std::move(model) : DefaultModel();
  batch->candidate_begin.push_back(static_cast<uint32_t>(scores.size()));
  batch->top_k.push_back(top_k);
  batch->item_dense = scores;
  return batch;
}

std::unique_ptr<Batch> MakeRequest(Batcher* batcher, int candidates) {
  return MakeRequest(batcher, std::vector<float>(candidates, 1.0f), 1);
}

void HoldTheWorker(Batcher& batcher, FakeBackend& backend, Outcome* blocker) {
  ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, {kHold}, 1), kNoDeadline, Record(blocker)).ok());
  backend.WaitRunning(1);
}

}  // namespace fuserank::engine::test
