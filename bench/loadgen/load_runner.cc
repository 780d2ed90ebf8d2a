#include "bench/loadgen/load_runner.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "fuserank/v1/ranker.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace fuserank::bench {
namespace {

constexpr char kRankMethod[] = "/fuserank.v1.Ranker/Rank";

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One RPC in flight; its address is the completion-queue tag.
struct Call {
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  int64_t start_ns = 0;  // scheduled (open loop) or actual (closed loop) send time
};

// A completion queue and what its poller thread records. Only the poller touches the
// plain fields; `interval` is shared with the progress thread.
struct Lane {
  grpc::CompletionQueue cq;
  grpc::GenericStub* stub = nullptr;
  int slots = 0;  // closed loop: calls this lane keeps in flight
  bool shut_down = false;
  LatencyHistogram latency;
  LatencyHistogram refused;
  int64_t ok = 0;
  int64_t completed_ok = 0;      // OK answers that arrived inside the window
  int64_t last_measured_ns = 0;  // the latest answer of a call sent inside the window
  std::vector<WindowBucket> buckets;
  std::map<std::string, int64_t> errors;
  absl::Mutex mu;
  LatencyHistogram interval ABSL_GUARDED_BY(mu);
  int64_t interval_errors ABSL_GUARDED_BY(mu) = 0;
};

class Runner {
 public:
  Runner(const RunOptions& options, const RequestPool& pool) : options_(options), pool_(pool) {}

  absl::StatusOr<RunResult> Run();

 private:
  void Start(const RunPlan& plan);
  absl::Status Connect();
  void Issue(Lane& lane, int64_t start_ns);
  void Poll(Lane& lane);
  void Complete(Lane& lane, const Call& call, int64_t now_ns);
  bool ValidResponse(const grpc::ByteBuffer& buffer) const;
  void Schedule();
  void ReportProgress(absl::Notification& done);
  RunResult Collect(double window_s);

  const RunOptions& options_;
  const RequestPool& pool_;
  std::vector<grpc::ByteBuffer> requests_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  std::deque<Lane> lanes_;
  std::atomic<uint64_t> next_request_{0};
  std::atomic<int64_t> inflight_{0};
  int64_t start_ns_ = 0;
  int64_t window_start_ns_ = 0;
  int64_t window_end_ns_ = 0;
  std::optional<RateSchedule> schedule_;  // open loop
  std::optional<WindowGrid> grid_;
  // Written by the open-loop scheduler only; read after it is joined.
  int64_t delayed_sends_ = 0;
  int64_t max_send_lag_ns_ = 0;
  std::vector<WindowBucket> send_buckets_;  // delayed sends and lag per bucket
};

absl::Status Runner::Connect() {
  for (int i = 0; i < options_.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    // Distinct arguments keep channels from sharing one subchannel (one connection).
    args.SetInt("fuserank.bench.channel", i);
    auto channel =
        grpc::CreateCustomChannel(options_.target, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::milliseconds(options_.connect_timeout_ms))) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", options_.target, " within ",
                                                 options_.connect_timeout_ms, " ms"));
    }
    stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
  return absl::OkStatus();
}

void Runner::Issue(Lane& lane, int64_t start_ns) {
  auto* call = new Call;
  call->start_ns = start_ns;
  call->context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::milliseconds(options_.timeout_ms));
  const uint64_t index = next_request_.fetch_add(1, std::memory_order_relaxed);
  inflight_.fetch_add(1, std::memory_order_relaxed);
  call->reader = lane.stub->PrepareUnaryCall(&call->context, kRankMethod,
                                             requests_[index % requests_.size()], &lane.cq);
  call->reader->StartCall();
  call->reader->Finish(&call->response, &call->status, call);
}

bool Runner::ValidResponse(const grpc::ByteBuffer& buffer) const {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return false;
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  fuserank::v1::RankResponse response;
  if (!response.ParseFromString(bytes)) return false;
  if (response.items_size() != pool_.expected_items) return false;
  float previous = 1.0f;
  for (const fuserank::v1::ScoredItem& item : response.items()) {
    // Scores are sigmoid outputs, sorted descending (NaN fails every comparison).
    if (!(item.score() >= 0.0f && item.score() <= previous)) return false;
    previous = item.score();
  }
  return true;
}

void Runner::Complete(Lane& lane, const Call& call, int64_t now_ns) {
  const bool measured = call.start_ns >= window_start_ns_ && call.start_ns < window_end_ns_;
  std::string error;
  if (!call.status.ok()) {
    error = StatusCodeName(call.status.error_code());
  } else if (options_.validate && !ValidResponse(call.response)) {
    error = "BAD_RESPONSE";
  }
  const int64_t latency = now_ns - call.start_ns;
  const int sent_in = grid_->Of(call.start_ns);
  if (measured) lane.last_measured_ns = std::max(lane.last_measured_ns, now_ns);
  if (error.empty()) {
    if (measured) {
      lane.latency.Record(latency);
      ++lane.ok;
    }
    if (now_ns >= window_start_ns_ && now_ns < window_end_ns_) ++lane.completed_ok;
    if (sent_in >= 0) {
      lane.buckets[sent_in].latency.Record(latency);
      ++lane.buckets[sent_in].ok;
    }
    if (const int done_in = grid_->Of(now_ns); done_in >= 0) ++lane.buckets[done_in].completed_ok;
    absl::MutexLock lock(&lane.mu);
    lane.interval.Record(latency);
  } else {
    if (measured) ++lane.errors[error];
    if (sent_in >= 0) ++lane.buckets[sent_in].errors;
    if (measured && call.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      lane.refused.Record(latency);
    }
    absl::MutexLock lock(&lane.mu);
    ++lane.interval_errors;
  }
}

void Runner::Poll(Lane& lane) {
  const bool closed_loop = options_.concurrency > 0;
  void* tag = nullptr;
  bool ok = false;
  while (lane.cq.Next(&tag, &ok)) {
    std::unique_ptr<Call> call(static_cast<Call*>(tag));
    const int64_t now = NowNs();
    Complete(lane, *call, now);
    call.reset();
    inflight_.fetch_sub(1, std::memory_order_relaxed);
    if (!closed_loop) continue;
    if (now < window_end_ns_) {
      Issue(lane, now);
    } else if (!lane.shut_down) {
      // Pending calls still drain through Next() after Shutdown().
      lane.shut_down = true;
      lane.cq.Shutdown();
    }
  }
}

void Runner::Schedule() {
  prctl(PR_SET_TIMERSLACK, 1000UL);  // 1 us: wake close to each scheduled send
  std::mt19937_64 rng(options_.seed);
  std::exponential_distribution<double> gap(1.0);  // in mean gaps of the current rate
  size_t lane = 0;
  int64_t next = start_ns_;
  while (next < window_end_ns_) {
    const int64_t now = NowNs();
    if (next > now) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(next - now));
      continue;
    }
    bool delayed = false;
    while (inflight_.load(std::memory_order_relaxed) >= options_.max_outstanding) {
      delayed = true;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (next >= window_start_ns_) {
      const int64_t lag = NowNs() - next;
      delayed_sends_ += delayed ? 1 : 0;
      max_send_lag_ns_ = std::max(max_send_lag_ns_, lag);
      if (const int b = grid_->Of(next); b >= 0) {
        send_buckets_[b].delayed_sends += delayed ? 1 : 0;
        send_buckets_[b].max_send_lag_ns = std::max(send_buckets_[b].max_send_lag_ns, lag);
      }
    }
    Issue(lanes_[lane], next);
    lane = (lane + 1) % lanes_.size();
    // Poisson arrivals are memoryless: a gap that would cross a change of rate restarts
    // at the change with the new rate. A gap past the window's end ends the sends; it is
    // never added to a time (at a tiny rate it overflowed int64 and wrapped to the past).
    int64_t from = next;
    for (;;) {
      const auto [rate, change] = schedule_->PhaseAt(from);
      const double gap_ns = gap(rng) / rate * 1e9;
      const int64_t until = std::min(change, window_end_ns_);
      if (gap_ns < static_cast<double>(until - from)) {
        next = from + std::llround(gap_ns);
        break;
      }
      if (change >= window_end_ns_) {
        next = window_end_ns_;
        break;
      }
      from = change;
    }
  }
  for (Lane& l : lanes_) l.cq.Shutdown();
}

void Runner::ReportProgress(absl::Notification& done) {
  LatencyHistogram merged;
  int64_t last = NowNs();
  while (!done.WaitForNotificationWithTimeout(absl::Seconds(1))) {
    merged.Reset();
    int64_t errors = 0;
    for (Lane& lane : lanes_) {
      absl::MutexLock lock(&lane.mu);
      merged.Merge(lane.interval);
      lane.interval.Reset();
      errors += lane.interval_errors;
      lane.interval_errors = 0;
    }
    const int64_t now = NowNs();
    const double elapsed = (now - start_ns_) / 1e9;
    const char* phase = last < window_start_ns_ ? "warmup"
                        : last < window_end_ns_ ? "run"
                                                : "drain";
    std::fprintf(stderr,
                 "[%5.1fs %-6s] qps %8.1f  p50 %7.3f ms  p99 %7.3f ms  errors %lld  "
                 "inflight %lld\n",
                 elapsed, phase, merged.count() / ((now - last) / 1e9),
                 merged.ValueAtQuantile(0.5) / 1e6, merged.ValueAtQuantile(0.99) / 1e6,
                 static_cast<long long>(errors),
                 static_cast<long long>(inflight_.load(std::memory_order_relaxed)));
    last = now;
  }
}

absl::StatusOr<RunResult> Runner::Run() {
  absl::StatusOr<RunPlan> plan = PlanRun(options_);
  if (!plan.ok()) return plan.status();
  if (pool_.serialized.empty()) return absl::InvalidArgumentError("empty request pool");
  for (const std::string& bytes : pool_.serialized) {
    grpc::Slice slice(bytes);
    requests_.emplace_back(&slice, 1);
  }
  if (absl::Status status = Connect(); !status.ok()) return status;
  Start(*plan);

  absl::Notification done;
  std::thread progress;
  if (options_.progress) progress = std::thread([&] { ReportProgress(done); });
  for (Lane& lane : lanes_) {
    for (int s = 0; s < lane.slots; ++s) Issue(lane, NowNs());
  }
  std::vector<std::thread> pollers;
  for (Lane& lane : lanes_) pollers.emplace_back([&] { Poll(lane); });
  std::thread scheduler;
  if (schedule_.has_value()) scheduler = std::thread([&] { Schedule(); });
  if (scheduler.joinable()) scheduler.join();
  for (std::thread& t : pollers) t.join();
  done.Notify();
  if (progress.joinable()) progress.join();
  return Collect(plan->window_s);
}

// The lanes, the clock of the run and its buckets, before the first call.
void Runner::Start(const RunPlan& plan) {
  int lanes = options_.threads;
  if (options_.concurrency > 0) lanes = std::min(lanes, options_.concurrency);
  for (int i = 0; i < lanes; ++i) {
    Lane& lane = lanes_.emplace_back();
    lane.stub = stubs_[i % stubs_.size()].get();
    if (options_.concurrency > 0) {
      lane.slots = options_.concurrency / lanes + (i < options_.concurrency % lanes ? 1 : 0);
    }
  }
  start_ns_ = NowNs();
  window_start_ns_ = start_ns_ + std::llround(options_.warmup_s * 1e9);
  window_end_ns_ = window_start_ns_ + std::max<int64_t>(1, std::llround(plan.window_s * 1e9));
  if (options_.concurrency == 0) {
    schedule_.emplace(options_.rate, options_.schedule, window_start_ns_);
  }
  grid_.emplace(window_start_ns_, window_end_ns_, plan.bucket_ns);
  const RateSchedule* schedule = schedule_.has_value() ? &*schedule_ : nullptr;
  send_buckets_ = grid_->NewBuckets(schedule);
  for (Lane& lane : lanes_) lane.buckets = grid_->NewBuckets(schedule);
}

// The lanes' records merged, after every thread is joined.
RunResult Runner::Collect(double window_s) {
  RunResult result;
  result.window_s = window_s;
  result.buckets = std::move(send_buckets_);
  int64_t last_measured_ns = 0;
  for (Lane& lane : lanes_) {
    result.latency.Merge(lane.latency);
    result.refused.Merge(lane.refused);
    result.ok += lane.ok;
    result.completed_ok += lane.completed_ok;
    last_measured_ns = std::max(last_measured_ns, lane.last_measured_ns);
    for (size_t b = 0; b < lane.buckets.size(); ++b) {
      MergeCalls(lane.buckets[b], &result.buckets[b]);
    }
    for (const auto& [code, n] : lane.errors) {
      result.errors_by_code[code] += n;
      result.errors += n;
    }
  }
  result.drain_ns = std::max<int64_t>(0, last_measured_ns - window_end_ns_);
  result.delayed_sends = delayed_sends_;
  result.max_send_lag_ns = max_send_lag_ns_;
  return result;
}

}  // namespace

std::string StatusCodeName(int code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return absl::StrCat("CODE_", code);
}

absl::StatusOr<RunResult> RunLoad(const RunOptions& options, const RequestPool& pool) {
  Runner runner(options, pool);
  return runner.Run();
}

}  // namespace fuserank::bench
