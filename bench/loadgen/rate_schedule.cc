#include "bench/loadgen/rate_schedule.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/check.h"

namespace fuserank::bench {
namespace {

// SimpleAtod takes "inf" and "nan": a rate of inf would send with no gap at all.
absl::Status CheckPhase(const RatePhase& phase) {
  if (!std::isfinite(phase.rate) || phase.rate <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rate must be finite and > 0 requests per second, not ", phase.rate));
  }
  if (!std::isfinite(phase.duration_s) || phase.duration_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the duration must be finite and > 0 seconds, not ", phase.duration_s));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<RatePhase>> ParseSchedule(absl::string_view text) {
  std::vector<RatePhase> phases;
  if (text.empty()) return phases;
  int entry = 0;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    ++entry;
    const std::string name = absl::StrCat("--schedule entry ", entry, " '", part, "': ");
    const std::vector<absl::string_view> fields = absl::StrSplit(part, ':');
    RatePhase phase;
    if (fields.size() != 2 || !absl::SimpleAtod(fields[0], &phase.rate) ||
        !absl::SimpleAtod(fields[1], &phase.duration_s)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "not RATE:SECONDS (the flag takes RATE:SECONDS,RATE:SECONDS,...)"));
    }
    if (absl::Status status = CheckPhase(phase); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, status.message()));
    }
    phases.push_back(phase);
  }
  return phases;
}

absl::Status ValidateSchedule(absl::Span<const RatePhase> phases) {
  for (size_t i = 0; i < phases.size(); ++i) {
    if (absl::Status status = CheckPhase(phases[i]); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--schedule phase ", i + 1, " of ", phases.size(), ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

double ScheduleSeconds(absl::Span<const RatePhase> phases) {
  double seconds = 0;
  for (const RatePhase& phase : phases) seconds += phase.duration_s;
  return seconds;
}

RateSchedule::RateSchedule(double rate, std::vector<RatePhase> phases, int64_t window_start_ns)
    : rate_(rate), phases_(std::move(phases)), window_start_ns_(window_start_ns) {
  FUSERANK_CHECK(phases_.empty() ? rate_ > 0 : ValidateSchedule(phases_).ok())
      << "a rate schedule needs a rate > 0 or valid phases";
  double seconds = 0;
  for (const RatePhase& phase : phases_) {
    seconds += phase.duration_s;
    phase_end_ns_.push_back(window_start_ns_ + std::llround(seconds * 1e9));
  }
}

std::pair<double, int64_t> RateSchedule::PhaseAt(int64_t t_ns) const {
  if (phases_.empty()) return {rate_, kNever};
  if (t_ns < window_start_ns_) return {phases_.front().rate, window_start_ns_};
  for (size_t i = 0; i < phases_.size(); ++i) {
    if (t_ns < phase_end_ns_[i]) return {phases_[i].rate, phase_end_ns_[i]};
  }
  return {phases_.back().rate, kNever};
}

}  // namespace fuserank::bench
