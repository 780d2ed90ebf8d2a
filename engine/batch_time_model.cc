#include "engine/batch_time_model.h"

#include <algorithm>
#include <cmath>

namespace fuserank::engine {
namespace {

// Each batch's weight decays by this much per later batch: about the last 20 count.
constexpr double kKeep = 0.95;
// A batch is counted as at most this many times what the model predicted for it: one
// stall (a paused process, a stolen core) would otherwise teach a wait so long that the
// door refuses for as long as it takes to unlearn. A lasting slowdown is still learnt,
// about 15% more per batch.
constexpr double kMaxOverPrediction = 4;

}  // namespace

BatchTimeModel::BatchTimeModel(int64_t max_batch_candidates, int workers)
    : max_batch_(static_cast<double>(std::max<int64_t>(1, max_batch_candidates))),
      workers_(static_cast<double>(std::max(1, workers))) {}

void BatchTimeModel::Note(int64_t candidates, double seconds) {
  if (candidates <= 0 || !(seconds > 0)) return;
  const double c = static_cast<double>(candidates);
  if (trained()) {
    // Against the mean batch too: with the per-batch part fitted to 0 (one batch size so
    // far), a small batch's prediction leaves out its overhead.
    const double predicted = std::max(PerBatch() + c * PerCandidate(), sum_t_ / weight_);
    seconds = std::min(seconds, kMaxOverPrediction * predicted);
  }
  weight_ = kKeep * weight_ + 1;
  sum_c_ = kKeep * sum_c_ + c;
  sum_t_ = kKeep * sum_t_ + seconds;
  sum_cc_ = kKeep * sum_cc_ + c * c;
  sum_ct_ = kKeep * sum_ct_ + c * seconds;
}

double BatchTimeModel::PerCandidate() const {
  const double mean_c = sum_c_ / weight_;
  const double mean_t = sum_t_ / weight_;
  const double var_c = sum_cc_ / weight_ - mean_c * mean_c;
  // Batches of (nearly) one size, or a fit that makes candidates free: time per candidate
  // from the averages alone, no per-batch part.
  if (var_c <= 1e-6 * mean_c * mean_c) return mean_t / mean_c;
  const double slope = (sum_ct_ / weight_ - mean_c * mean_t) / var_c;
  return slope > 0 ? slope : mean_t / mean_c;
}

double BatchTimeModel::PerBatch() const {
  const double b = PerCandidate();
  const double a = sum_t_ / weight_ - b * sum_c_ / weight_;
  return std::max(0.0, a);
}

double BatchTimeModel::WaitSeconds(int64_t candidates) const {
  if (!trained() || candidates <= 0) return 0;
  const double c = static_cast<double>(candidates);
  const double batches = std::ceil(c / max_batch_);
  return (batches * PerBatch() + c * PerCandidate()) / workers_;
}

double BatchTimeModel::FullBatchRate() const {
  if (!trained()) return 0;
  return workers_ * max_batch_ / (PerBatch() + max_batch_ * PerCandidate());
}

}  // namespace fuserank::engine
