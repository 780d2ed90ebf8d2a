// Tests of engine/batcher with real pieces: merged batches on the CPU engine score bit for
// bit like each request alone, and a warm Batcher allocates nothing per request (counted
// with the process-wide allocation counter of alloc_counter_util).
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "engine/batcher.h"
#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/engine/alloc_counter_util.h"
#include "tests/engine/batcher_test_util.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using test::kNoDeadline;
using test::kPatience;
using test::Outcome;
using test::Record;

// One worker that answers every request with its first top_k candidates without
// allocating once its buffers have grown. While hold() is set, Run() waits (spinning, so
// that it allocates nothing).
class QuietBackend : public Backend {
 public:
  std::string device() const override { return "quiet"; }
  int num_workers() const override { return 1; }
  absl::Status Run(int, const Batch& batch, BatchResult* result) override {
    running_.fetch_add(1);
    while (hold_.load()) std::this_thread::yield();
    for (int r = 0; r < batch.num_requests(); ++r) {
      for (uint32_t c = 0; c < batch.top_k[r]; ++c) result->items.push_back({c, 1.0f});
      result->result_begin.push_back(static_cast<uint32_t>(result->items.size()));
    }
    running_.fetch_sub(1);
    return absl::OkStatus();
  }
  void set_hold(bool hold) { hold_.store(hold); }
  int running() const { return running_.load(); }

 private:
  std::atomic<bool> hold_{false};
  std::atomic<int> running_{0};
};

TEST(BatcherTest, AllocatesNothingPerRequestOnceWarm) {
  constexpr int kBurst = 16;  // requests submitted together, then awaited
  constexpr int kMaxCandidates = 8;
  std::atomic<int> completed{0};
  std::atomic<int> failed{0};
  QuietBackend backend;
  BatcherOptions options;
  options.max_batch_wait_us = 50;
  Batcher batcher(&backend, options);
  absl::Cleanup release_on_exit = [&backend] { backend.set_hold(false); };
  const std::shared_ptr<const Model> model = test::DenseScoreModel();
  ASSERT_NE(model, nullptr);
  auto submit = [&](int candidates, uint32_t top_k) {
    std::unique_ptr<Batch> request = batcher.AcquireBatch();
    request->model = model;
    request->candidate_begin.push_back(candidates);
    request->top_k.push_back(top_k);
    request->item_dense.assign(candidates, 0.5f);
    const absl::Status status =
        batcher.Submit(std::move(request), kNoDeadline,
                       [&completed, &failed](const absl::Status& status, const RequestResult&) {
                         if (!status.ok()) failed.fetch_add(1);
                         completed.fetch_add(1);
                       });
    if (!status.ok()) failed.fetch_add(1);
  };
  auto await = [&](int target) {
    while (completed.load() < target && failed.load() == 0) std::this_thread::yield();
  };
  // Warm-up: the pooled request batches grown to the largest request, then the largest
  // merge (kBurst requests queued behind a held batch) so the worker's buffers grow too.
  {
    std::vector<std::unique_ptr<Batch>> grown;
    for (int i = 0; i < 4 * kBurst; ++i) {
      grown.push_back(batcher.AcquireBatch());
      grown.back()->candidate_begin.push_back(kMaxCandidates);
      grown.back()->top_k.push_back(kMaxCandidates);
      grown.back()->item_dense.assign(kMaxCandidates, 0.5f);
    }
    for (auto& batch : grown) batcher.ReleaseBatch(std::move(batch));
  }
  backend.set_hold(true);
  submit(kMaxCandidates, kMaxCandidates);
  while (backend.running() == 0) std::this_thread::yield();
  for (int i = 0; i < kBurst; ++i) submit(kMaxCandidates, kMaxCandidates);
  backend.set_hold(false);
  await(kBurst + 1);
  // Bursts of requests of 1..kMaxCandidates candidates, as they come: merged or not.
  auto run_bursts = [&](int bursts) {
    for (int b = 0; b < bursts; ++b) {
      const int target = completed.load() + kBurst;
      for (int i = 0; i < kBurst; ++i) {
        const int n = 1 + (b + i) % kMaxCandidates;
        submit(n, 1 + i % n);
      }
      await(target);
    }
  };
  run_bursts(50);
  int64_t allocations = 0;
  {
    test::ScopedAllocationCounter counter;
    run_bursts(100);
    allocations = counter.count();
  }
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(completed.load(), (1 + 150) * kBurst + 1);
  EXPECT_EQ(allocations, 0) << "heap allocations in 100 warm bursts of " << kBurst << " requests";
}

// Holds the first Run() of a real backend until Open(), so that requests queue behind it.
class GatedBackend : public Backend {
 public:
  explicit GatedBackend(Backend* inner) : inner_(inner) {}
  std::string device() const override { return inner_->device(); }
  int num_workers() const override { return inner_->num_workers(); }
  absl::Status Run(int worker, const Batch& batch, BatchResult* result) override {
    {
      absl::MutexLock lock(&mu_);
      ++started_;
      auto open = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return open_ || started_ > 1; };
      mu_.Await(absl::Condition(&open));
      max_requests_ = std::max(max_requests_, batch.num_requests());
    }
    return inner_->Run(worker, batch, result);
  }
  void WaitStarted() {
    absl::MutexLock lock(&mu_);
    auto started = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return started_ >= 1; };
    mu_.Await(absl::Condition(&started));
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  int max_requests() {
    absl::MutexLock lock(&mu_);
    return max_requests_;
  }

 private:
  Backend* const inner_;
  absl::Mutex mu_;
  int started_ = 0;
  bool open_ = false;
  int max_requests_ = 0;
};

uint32_t Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

class BatcherCpuTest : public ::testing::TestWithParam<int> {};  // cpu_threads

TEST_P(BatcherCpuTest, MergedBatchesScoreBitIdenticalToEachRequestAlone) {
  const uint64_t seed = 20240611 + GetParam();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const testing::TestModel test_model =
      testing::MakeRandomModel(testing::SmallSpec(2, 3, 1000, 8), seed);
  absl::StatusOr<std::shared_ptr<const Model>> model = testing::BuildTestModel(test_model);
  ASSERT_TRUE(model.ok()) << model.status();
  BackendOptions backend_options;
  backend_options.workers = 1;
  backend_options.cpu_threads = GetParam();
  std::unique_ptr<Backend> cpu = CreateCpuBackend(*model, backend_options);

  std::mt19937_64 rng(seed);
  constexpr int kRequests = 24;
  Outcome blocker;
  std::vector<Outcome> outcomes(kRequests);
  std::vector<Batch> alone(kRequests);
  std::vector<BatchResult> expected(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    test::RequestShape shape;
    shape.candidates = 1 + static_cast<int>(rng() % 40);
    test::RefRequest request = test::RandomRequest(test_model.spec, shape, rng);
    request.top_k = static_cast<uint32_t>(rng() % (shape.candidates + 3));  // 0: all
    alone[i] = test::MakeBatch(*model, {request});
    ASSERT_TRUE(cpu->Run(0, alone[i], &expected[i]).ok());
  }

  GatedBackend gated(cpu.get());
  Batcher batcher(&gated, {});
  absl::Cleanup open_on_exit = [&gated] { gated.Open(); };  // no hang on failure
  auto blocker_batch = batcher.AcquireBatch();
  *blocker_batch = alone[0];
  ASSERT_TRUE(batcher.Submit(std::move(blocker_batch), kNoDeadline, Record(&blocker)).ok());
  gated.WaitStarted();
  for (int i = 0; i < kRequests; ++i) {
    auto batch = batcher.AcquireBatch();
    *batch = alone[i];
    ASSERT_TRUE(batcher.Submit(std::move(batch), kNoDeadline, Record(&outcomes[i])).ok());
  }
  gated.Open();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(outcomes[i].done.WaitForNotificationWithTimeout(kPatience));
    ASSERT_TRUE(outcomes[i].status.ok()) << outcomes[i].status;
    const BatchResult& want = expected[i];
    ASSERT_EQ(outcomes[i].items.size(), want.items.size()) << "request " << i;
    for (size_t k = 0; k < want.items.size(); ++k) {
      EXPECT_EQ(outcomes[i].items[k].index, want.items[k].index)
          << "request " << i << " rank " << k;
      EXPECT_EQ(Bits(outcomes[i].items[k].score), Bits(want.items[k].score))
          << "request " << i << " rank " << k << ": " << outcomes[i].items[k].score << " vs "
          << want.items[k].score;
    }
  }
  EXPECT_EQ(gated.max_requests(), kRequests) << "the queued requests should form one batch";
}

INSTANTIATE_TEST_SUITE_P(CpuThreads, BatcherCpuTest, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 1 ? std::string("OneThread")
                                                  : std::string("TwoThreads");
                         });

}  // namespace
}  // namespace fuserank::engine
