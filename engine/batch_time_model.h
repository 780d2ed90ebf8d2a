// How long the workers take to run queued work, learnt from the batches they ran: a line
// t = a + b * c (a per batch, b per candidate) fitted over recent batches by exponentially
// weighted least squares. A queue of small requests runs merged into large batches, so a
// plain candidates-per-second average of small batches (all overhead) would overstate the
// wait behind them. Used by the Batcher's admission under its mutex: not thread-safe.
#ifndef FUSERANK_ENGINE_BATCH_TIME_MODEL_H_
#define FUSERANK_ENGINE_BATCH_TIME_MODEL_H_

#include <cstdint>

namespace fuserank::engine {

class BatchTimeModel {
 public:
  // Batches hold at most `max_batch_candidates`; `workers` run them side by side.
  BatchTimeModel(int64_t max_batch_candidates, int workers);

  // One batch of `candidates` took `seconds` in Run(); counted as at most 4 times what the
  // model predicted for it, or the mean batch if more (a stall is not learnt as the new
  // normal).
  void Note(int64_t candidates, double seconds);
  // Seconds until `candidates` queued candidates have run, in full batches spread over the
  // workers; 0 until a batch has been noted.
  double WaitSeconds(int64_t candidates) const;
  bool trained() const { return weight_ > 0; }
  // Candidates per second of one full batch on every worker, for messages.
  double FullBatchRate() const;

 private:
  double PerBatch() const;      // a
  double PerCandidate() const;  // b

  const double max_batch_;
  const double workers_;
  // Exponentially weighted sums: count, c, t, c*c, c*t.
  double weight_ = 0;
  double sum_c_ = 0;
  double sum_t_ = 0;
  double sum_cc_ = 0;
  double sum_ct_ = 0;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_BATCH_TIME_MODEL_H_
