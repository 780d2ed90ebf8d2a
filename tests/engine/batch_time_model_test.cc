#include "engine/batch_time_model.h"

#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

TEST(BatchTimeModelTest, PredictsNothingUntilABatchHasRun) {
  BatchTimeModel model(8192, 1);
  EXPECT_FALSE(model.trained());
  EXPECT_EQ(model.WaitSeconds(1000), 0);
  model.Note(0, 1.0);  // ignored: no candidates
  model.Note(10, 0);   // ignored: no time
  EXPECT_FALSE(model.trained());
}

TEST(BatchTimeModelTest, LearnsThePerBatchAndPerCandidateTime) {
  // t = 2 ms + 10 us per candidate. Small batches alone would suggest far more per candidate.
  BatchTimeModel model(8192, 1);
  for (int round = 0; round < 10; ++round) {
    for (int c : {100, 1000, 5000, 8000, 300}) model.Note(c, 0.002 + 1e-5 * c);
  }
  // 16000 candidates run as two full batches: 2 x 2 ms + 160 ms.
  EXPECT_NEAR(model.WaitSeconds(16000), 0.164, 1e-6);
  EXPECT_NEAR(model.WaitSeconds(100), 0.003, 1e-6);
  EXPECT_NEAR(model.FullBatchRate(), 8192 / (0.002 + 0.08192), 1e-3);
}

TEST(BatchTimeModelTest, BatchesOfOneSizeGiveATimePerCandidate) {
  BatchTimeModel model(8192, 1);
  for (int i = 0; i < 5; ++i) model.Note(100, 0.01);
  EXPECT_NEAR(model.WaitSeconds(1000), 0.1, 1e-9);
}

TEST(BatchTimeModelTest, WorkersShareTheWaitAndRecentBatchesWeighMost) {
  BatchTimeModel model(1000, 2);
  for (int i = 0; i < 200; ++i) model.Note(500, 0.5);   // slow at first
  for (int i = 0; i < 200; ++i) model.Note(500, 0.05);  // then ten times faster
  EXPECT_NEAR(model.WaitSeconds(1000), 0.05, 0.005);    // 1000 x 0.1 ms over 2 workers
}

TEST(BatchTimeModelTest, AStallCountsAsAtMostFourTimesThePrediction) {
  BatchTimeModel model(1000, 1);
  for (int i = 0; i < 50; ++i) model.Note(100, 0.01);
  EXPECT_NEAR(model.WaitSeconds(100), 0.01, 1e-9);
  model.Note(100, 2.0);  // a 2 s pause: counted as 40 ms
  // About 20 batches weigh: (19 x 10 ms + 40 ms) / 20, not 110 ms.
  EXPECT_NEAR(model.WaitSeconds(100), 0.0115, 0.0005);
  for (int i = 0; i < 40; ++i) model.Note(100, 0.01);
  EXPECT_NEAR(model.WaitSeconds(100), 0.01, 0.0005);
}

TEST(BatchTimeModelTest, ALastingSlowdownIsStillLearnt) {
  BatchTimeModel model(1000, 1);
  for (int i = 0; i < 50; ++i) model.Note(100, 0.01);
  int batches = 0;
  while (model.WaitSeconds(100) < 0.09 && batches < 1000) {
    model.Note(100, 0.1);  // ten times slower from now on
    ++batches;
  }
  EXPECT_LT(batches, 60) << "a tenfold slowdown took " << batches << " batches to learn";
}

}  // namespace
}  // namespace fuserank::engine
