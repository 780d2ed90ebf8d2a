#include "bench/loadgen/report.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace fuserank::bench {
namespace {

// JSON has no NaN or infinity.
std::string Number(double value, int decimals) {
  if (!std::isfinite(value)) return "null";
  return absl::StrFormat("%.*f", decimals, value);
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// OK answers per second that arrived inside the window: calls sent in the window and
// answered after it (up to the deadline) are not throughput inside it.
double Qps(const BenchReport& report) {
  const double window = report.result.window_s;
  return window > 0 ? static_cast<double>(report.result.completed_ok) / window : 0.0;
}

// Whether `h` holds enough values for its quantile `q`: at least 10 above it (under
// 10 / (1 - q) values the quantile is within a value or two of the maximum), so p99 needs
// 1,000 values and p99.9 10,000.
bool HasQuantile(const LatencyHistogram& h, double q) {
  return static_cast<double>(h.count()) * (1.0 - q) >= 10.0 - 1e-9;
}

// The quantile of `h` in ms for text, or "-" when it has too few values for one.
std::string Quantile(const LatencyHistogram& h, double q) {
  if (!HasQuantile(h, q)) return "-";
  return absl::StrFormat("%.3f", Ms(h.ValueAtQuantile(q)));
}

// The same for JSON: null when too few.
std::string QuantileJson(const LatencyHistogram& h, double q) {
  if (!HasQuantile(h, q)) return "null";
  return Number(Ms(h.ValueAtQuantile(q)), 4);
}

std::string BucketJson(const WindowBucket& b) {
  return absl::StrCat(
      "{\"start_s\":", Number(b.start_s, 3), ",\"rate\":", Number(b.rate, 3), ",\"ok\":", b.ok,
      ",\"errors\":", b.errors, ",\"completed_ok\":", b.completed_ok,
      ",\"p50_ms\":", Number(Ms(b.latency.ValueAtQuantile(0.5)), 4),
      ",\"p99_ms\":", QuantileJson(b.latency, 0.99), ",\"max_ms\":", Number(Ms(b.latency.max()), 4),
      ",\"delayed_sends\":", b.delayed_sends,
      ",\"max_send_lag_ms\":", Number(Ms(b.max_send_lag_ns), 4), "}");
}

}  // namespace

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string ReportJson(const BenchReport& report) {
  const RunResult& r = report.result;
  const LatencyHistogram& h = r.latency;
  const bool closed = report.run.concurrency > 0;
  std::vector<std::string> codes;
  for (const auto& [code, n] : r.errors_by_code) {
    codes.push_back(absl::StrCat(JsonQuote(code), ":", n));
  }
  std::vector<std::string> buckets;
  for (const WindowBucket& b : r.buckets) buckets.push_back(BucketJson(b));
  std::vector<std::string> phases;
  for (const RatePhase& p : report.run.schedule) {
    phases.push_back(absl::StrCat("[", Number(p.rate, 3), ",", Number(p.duration_s, 3), "]"));
  }
  std::vector<std::pair<std::string, std::string>> fields = {
      {"target", JsonQuote(report.target)},
      {"model", JsonQuote(report.model)},
      {"mode", JsonQuote(closed ? "closed" : "open")},
      {"concurrency", closed ? absl::StrCat(report.run.concurrency) : "null"},
      {"rate", closed ? "null" : Number(report.run.rate, 3)},
      {"candidates", absl::StrCat(report.request.candidates)},
      {"top_k", absl::StrCat(report.request.top_k)},
      {"bag", absl::StrCat(report.request.bag)},
      {"zipf", Number(report.request.zipf_alpha, 3)},
      {"duration_s", Number(r.window_s, 3)},
      {"warmup_s", Number(report.run.warmup_s, 3)},
      {"channels", absl::StrCat(report.run.channels)},
      {"threads", absl::StrCat(report.run.threads)},
      {"requests_pool", absl::StrCat(report.requests_pool)},
      {"request_bytes", Number(report.request_bytes, 1)},
      {"seed", absl::StrCat(report.request.seed)},
      {"ok", absl::StrCat(r.ok)},
      {"errors", absl::StrCat(r.errors)},
      {"errors_by_code", absl::StrCat("{", absl::StrJoin(codes, ","), "}")},
      {"completed_ok", absl::StrCat(r.completed_ok)},
      {"drain_ms", Number(Ms(r.drain_ns), 4)},
      {"qps", Number(Qps(report), 2)},
      {"candidates_per_s", Number(Qps(report) * report.request.candidates, 1)},
      {"mean_ms", Number(h.mean() / 1e6, 4)},
      {"min_ms", Number(Ms(h.min()), 4)},
      {"p50_ms", Number(Ms(h.ValueAtQuantile(0.50)), 4)},
      {"p90_ms", Number(Ms(h.ValueAtQuantile(0.90)), 4)},
      {"p99_ms", Number(Ms(h.ValueAtQuantile(0.99)), 4)},
      {"p999_ms", Number(Ms(h.ValueAtQuantile(0.999)), 4)},
      {"max_ms", Number(Ms(h.max()), 4)},
      {"refused_p50_ms", Number(Ms(r.refused.ValueAtQuantile(0.50)), 4)},
      {"refused_p99_ms", Number(Ms(r.refused.ValueAtQuantile(0.99)), 4)},
      {"delayed_sends", absl::StrCat(r.delayed_sends)},
      {"max_send_lag_ms", Number(Ms(r.max_send_lag_ns), 4)},
      {"schedule", absl::StrCat("[", absl::StrJoin(phases, ","), "]")},
      {"buckets", absl::StrCat("[", absl::StrJoin(buckets, ","), "]")},
  };
  std::vector<std::string> parts;
  for (const auto& [key, value] : fields) parts.push_back(absl::StrCat(JsonQuote(key), ":", value));
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

std::string ReportText(const BenchReport& report) {
  const RunResult& r = report.result;
  const LatencyHistogram& h = r.latency;
  const std::string load = report.run.concurrency > 0
                               ? absl::StrCat("concurrency ", report.run.concurrency)
                               : absl::StrCat("rate ", report.run.rate, "/s (Poisson)");
  std::string text = absl::StrFormat(
      "fuserank-bench %s model %s: %s, %d candidates, top_k %u, %.1f s (+%.1f s warmup)\n",
      report.target, report.model, load, report.request.candidates, report.request.top_k,
      r.window_s, report.run.warmup_s);
  absl::StrAppendFormat(&text,
                        "  ok %d  errors %d  qps %.1f (OK answers inside the window)  "
                        "candidates/s %.0f\n",
                        r.ok, r.errors, Qps(report), Qps(report) * report.request.candidates);
  if (r.drain_ns > 0) {
    absl::StrAppendFormat(&text, "  last answer of a call sent in the window: %.3f ms after it\n",
                          Ms(r.drain_ns));
  }
  absl::StrAppendFormat(&text,
                        "  latency ms of %d OK calls: mean %.3f  p50 %.3f  p90 %s  p99 %s  "
                        "p99.9 %s  max %.3f\n",
                        h.count(), h.mean() / 1e6, Ms(h.ValueAtQuantile(0.5)), Quantile(h, 0.9),
                        Quantile(h, 0.99), Quantile(h, 0.999), Ms(h.max()));
  for (const auto& [code, n] : r.errors_by_code) {
    absl::StrAppendFormat(&text, "  error %s: %d\n", code, n);
  }
  if (r.refused.count() > 0) {
    absl::StrAppendFormat(
        &text, "  RESOURCE_EXHAUSTED answered in ms: p50 %.3f  p99 %s (%d calls)\n",
        Ms(r.refused.ValueAtQuantile(0.5)), Quantile(r.refused, 0.99), r.refused.count());
  }
  if (report.run.rate > 0 && (r.delayed_sends > 0 || r.max_send_lag_ns > 1000000)) {
    absl::StrAppendFormat(&text,
                          "  open loop: %d sends held by --max_outstanding, latest send %.3f ms "
                          "behind schedule (counted in latency)\n",
                          r.delayed_sends, Ms(r.max_send_lag_ns));
  }
  for (const WindowBucket& b : r.buckets) {
    absl::StrAppendFormat(&text,
                          "  at %6.2f s  rate %8.1f  ok %6d  errors %5d  answered %6d  "
                          "p50 %8.3f  p99 %8s  max %8.3f ms  held %d  lag %.3f ms\n",
                          b.start_s, b.rate, b.ok, b.errors, b.completed_ok,
                          Ms(b.latency.ValueAtQuantile(0.5)), Quantile(b.latency, 0.99),
                          Ms(b.latency.max()), b.delayed_sends, Ms(b.max_send_lag_ns));
  }
  return text;
}

}  // namespace fuserank::bench
