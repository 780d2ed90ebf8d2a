// spdlog set-up from the `logging` config: level, and text or JSON lines on stderr. Every
// message is escaped on its way out (control characters, newlines and bytes that are not
// UTF-8 become \n / \xNN; messages are cut at kMaxLogMessageBytes on a character boundary),
// so text a client sends (a model name, a path, a request id) can neither forge log lines
// nor break the JSON. Also: LogSafe for quoting such text inside a message, and
// LogQuoted for such text inside '...' in a line of fields (the access log), and
// LogRateLimiter for lines a client can trigger at will (refused admin calls).
// ConfigureLogging: call once at start, before other threads log. The rest is thread-safe.
#ifndef FUSERANK_SERVER_LOGGING_H_
#define FUSERANK_SERVER_LOGGING_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/config.h"

namespace fuserank::server {

// Longest message payload written (bytes of the message before escaping).
inline constexpr size_t kMaxLogMessageBytes = 16384;

// Replaces spdlog's default logger with one writing `config.format` lines to stderr, and
// routes libprotobuf's and gRPC core's log lines through it (rate-limited: at most 10 a
// second each).
void ConfigureLogging(const LoggingConfig& config);

// Logs `title` and a multi-line `text` (the effective config) at info: one escaped message
// in JSON, one line per text line (indented) in text, so neither format needs raw newlines.
void LogInfoLines(absl::string_view title, absl::string_view text);

// `text` from a client, escaped (engine/escape_text.h) and cut to `max_bytes` on a UTF-8
// character boundary, for quoting inside a log line or a status message.
std::string LogSafe(absl::string_view text, size_t max_bytes = 256);

// LogSafe, and every ' written as \x27: for a value a line quotes as field='value' (the
// access log's request_id and model), which then cannot close its quotes and add fields.
std::string LogQuoted(absl::string_view text, size_t max_bytes = 256);

// True for a random `fraction` of calls (logging.access_log_sample): whether this call
// gets an access-log line. Never for fraction <= 0; always for >= 1.
bool AccessLogSampled(double fraction);

// Lets through at most `burst` lines per `window`, and counts the rest so that the next line
// let through can say how many were dropped. Thread-safe.
class LogRateLimiter {
 public:
  LogRateLimiter(int burst, absl::Duration window) : burst_(burst), window_(window) {}

  // True when a line may be written now; `*dropped` is then the number of lines refused
  // since the last one let through.
  bool Allow(uint64_t* dropped);

 private:
  const int burst_;
  const absl::Duration window_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int in_window_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_LOGGING_H_
