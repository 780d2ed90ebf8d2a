// What the Batcher tests on fake backends share: the models their requests are for (each
// request a Batcher takes must pass ValidateBatch() against its model), and what a request's
// done callback reported. The model builders are thread-safe (each call builds a new
// model); an Outcome is written by the one callback and read after done is notified.
#ifndef FUSERANK_TESTS_ENGINE_BATCHER_TEST_UTIL_H_
#define FUSERANK_TESTS_ENGINE_BATCHER_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "engine/batch.h"
#include "engine/batcher.h"
#include "engine/model.h"

namespace fuserank::engine::test {

// No tables and one dense item feature per candidate (which the fake backends read as the
// candidate's score): a request is candidate_begin, top_k and item_dense alone.
std::shared_ptr<const Model> DenseScoreModel(uint64_t seed = 1);

// One user table and one item table of `rows` rows, no dense features: a request holds
// one user bag and one item bag per candidate.
std::shared_ptr<const Model> OneTablePerSideModel(int64_t rows = 64);

inline constexpr auto kNoDeadline = BatcherClock::time_point::max();
// Long enough that nothing in these tests waits it out by accident.
inline constexpr absl::Duration kPatience = absl::Seconds(20);

// What a request's done callback reported.
struct Outcome {
  absl::Notification done;
  absl::Status status;
  std::vector<ScoredIndex> items;
  double queue_seconds = -1;
  int batch_candidates = 0;
  int batch_requests = 0;
  int position = -1;
};

// A done callback that fills `outcome` and then notifies outcome->done.
RequestDone Record(Outcome* outcome);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_BATCHER_TEST_UTIL_H_
