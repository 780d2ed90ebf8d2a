#include "bench/loadgen/window_buckets.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/check.h"

namespace fuserank::bench {

absl::StatusOr<int64_t> BucketNanos(double bucket_s, double window_s) {
  FUSERANK_CHECK(std::isfinite(window_s) && window_s > 0) << window_s;
  if (!std::isfinite(bucket_s) || bucket_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bucket must be finite and >= 0 seconds, not ", bucket_s));
  }
  if (bucket_s == 0) return 0;
  const int64_t window_ns = std::max<int64_t>(1, std::llround(window_s * 1e9));
  if (bucket_s >= window_s) return window_ns;
  const int64_t bucket_ns = std::llround(bucket_s * 1e9);
  if (bucket_ns == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--bucket=", bucket_s, " rounds to 0 ns: give 0 for no buckets, or at least 1e-9 s"));
  }
  const int64_t buckets = (window_ns + bucket_ns - 1) / bucket_ns;
  if (buckets > kMaxWindowBuckets) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--bucket=", bucket_s, " cuts the ", window_s, " s window (--duration, or the sum of ",
        "--schedule) into ", buckets, " buckets; at most ", kMaxWindowBuckets,
        " (each holds a latency histogram per thread): give --bucket >= ",
        window_s / kMaxWindowBuckets, " or a shorter --duration"));
  }
  return bucket_ns;
}

WindowGrid::WindowGrid(int64_t window_start_ns, int64_t window_end_ns, int64_t bucket_ns)
    : window_start_ns_(window_start_ns), window_end_ns_(window_end_ns), bucket_ns_(bucket_ns) {
  FUSERANK_CHECK(bucket_ns >= 0 && window_start_ns <= window_end_ns);
  const int64_t length = window_end_ns - window_start_ns;
  const int64_t size = bucket_ns == 0 ? 0 : (length + bucket_ns - 1) / bucket_ns;
  FUSERANK_CHECK(size <= kMaxWindowBuckets) << size << " buckets";
  size_ = static_cast<int>(size);
}

int WindowGrid::Of(int64_t t_ns) const {
  if (size_ == 0 || t_ns < window_start_ns_ || t_ns >= window_end_ns_) return -1;
  return static_cast<int>(std::min<int64_t>((t_ns - window_start_ns_) / bucket_ns_, size_ - 1));
}

std::vector<WindowBucket> WindowGrid::NewBuckets(const RateSchedule* schedule) const {
  std::vector<WindowBucket> buckets(size_);
  for (int b = 0; b < size_; ++b) {
    const int64_t start = window_start_ns_ + b * bucket_ns_;
    buckets[b].start_s = static_cast<double>(start - window_start_ns_) / 1e9;
    buckets[b].rate = schedule == nullptr ? 0 : schedule->PhaseAt(start).first;
  }
  return buckets;
}

void MergeCalls(const WindowBucket& from, WindowBucket* into) {
  into->latency.Merge(from.latency);
  into->ok += from.ok;
  into->errors += from.errors;
  into->completed_ok += from.completed_ok;
}

}  // namespace fuserank::bench
