#include "server/logging.h"

#include <grpc/support/log.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "engine/escape_text.h"
#include "google/protobuf/stubs/logging.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {
namespace {

std::atomic<bool> g_json{false};

void Append(spdlog::memory_buf_t& dest, absl::string_view text) {
  dest.append(text.data(), text.data() + text.size());
}

// The message as the inside of a JSON string: '"', '\\' and control characters escaped,
// bytes that are not UTF-8 written as the text \xNN (a JSON-escaped backslash), cut at
// kMaxLogMessageBytes on a character boundary.
void AppendJson(absl::string_view text, spdlog::memory_buf_t& dest) {
  size_t i = 0;
  while (i < text.size()) {
    size_t length = engine::Utf8SequenceLength(text.substr(i));
    if (i + std::max<size_t>(length, 1) > kMaxLogMessageBytes) {
      Append(dest, "...");
      return;
    }
    const unsigned char c = static_cast<unsigned char>(text[i]);
    char escaped[8];
    if (length == 0) {
      std::snprintf(escaped, sizeof(escaped), "\\\\x%02x", c);
      Append(dest, escaped);
      length = 1;
    } else if (length > 1) {
      const bool c1 = c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0;
      if (c1) {
        std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned char>(text[i + 1]));
        Append(dest, escaped);
      } else {
        Append(dest, text.substr(i, length));
      }
    } else if (c == '"') {
      Append(dest, "\\\"");
    } else if (c == '\\') {
      Append(dest, "\\\\");
    } else if (c == '\n') {
      Append(dest, "\\n");
    } else if (c == '\r') {
      Append(dest, "\\r");
    } else if (c == '\t') {
      Append(dest, "\\t");
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      Append(dest, escaped);
    } else {
      dest.push_back(static_cast<char>(c));
    }
    i += length;
  }
}

// %* in a pattern: the message escaped for the format (text: engine::EscapeText unless it
// is already printable UTF-8; JSON: AppendJson), so that no message can write a raw
// newline, a control character or bytes that are not UTF-8.
class EscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  explicit EscapedMessage(bool json) : json_(json) {}

  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const absl::string_view payload(msg.payload.data(), msg.payload.size());
    if (json_) {
      AppendJson(payload, dest);
    } else if (payload.size() <= kMaxLogMessageBytes && engine::IsPrintableUtf8(payload)) {
      // Nothing to escape; text quoted with LogSafe / LogQuoted is printable, and its
      // escapes (\\, \n, \x27) must not be escaped a second time.
      Append(dest, payload);
    } else {
      Append(dest, engine::EscapeText(payload, kMaxLogMessageBytes));
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessage>(json_);
  }

 private:
  const bool json_;
};

}  // namespace

namespace {

// A line of a library's own (libprotobuf, gRPC core) through the logger: escaped, in the
// configured format, and rate-limited by `limiter` (a client can trigger some at will)
// unless `always`; the next line let through says how many were dropped. Once spdlog has
// shut down (the end of main) there is no logger: a line written then (from a thread still
// winding down) goes to stderr, escaped.
void LogLibraryLine(LogRateLimiter& limiter, bool always, spdlog::level::level_enum level,
                    absl::string_view prefix, absl::string_view message, const char* file,
                    int line) {
  uint64_t dropped = 0;
  if (!always && !limiter.Allow(&dropped)) return;
  const std::string text =
      absl::StrCat(prefix, message, " (", file, ":", line, ")",
                   dropped > 0 ? absl::StrCat(" [", dropped, " dropped]") : "");
  if (spdlog::default_logger_raw() == nullptr) {
    const std::string escaped = engine::EscapeText(text, kMaxLogMessageBytes) + "\n";
    std::fwrite(escaped.data(), 1, escaped.size(), stderr);
    return;
  }
  spdlog::log(level, "{}", text);
}

// libprotobuf's lines: a message gRPC could not parse (a string field that is not UTF-8,
// say). A fatal one is never dropped.
void ProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                 const std::string& message) {
  static LogRateLimiter limiter(10, absl::Seconds(1));
  const spdlog::level::level_enum to =
      level == google::protobuf::LOGLEVEL_INFO    ? spdlog::level::info
      : level == google::protobuf::LOGLEVEL_FATAL ? spdlog::level::critical
                                                  : spdlog::level::warn;
  LogLibraryLine(limiter, level == google::protobuf::LOGLEVEL_FATAL, to, "libprotobuf: ", message,
                 filename, line);
}

// gRPC core's lines: every compressed request logs "Compression algorithm 'gzip' is
// disabled." at error level (server.cc). The line gRPC writes just before it aborts is
// never dropped.
void GrpcLog(gpr_log_func_args* args) {
  static LogRateLimiter limiter(10, absl::Seconds(1));
  const spdlog::level::level_enum to =
      args->severity == GPR_LOG_SEVERITY_DEBUG  ? spdlog::level::debug
      : args->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::info
                                                : spdlog::level::err;
  LogLibraryLine(limiter, absl::StartsWith(args->message, "assertion failed"), to,
                 "grpc: ", args->message, args->file, args->line);
}

}  // namespace

void ConfigureLogging(const LoggingConfig& config) {
  auto logger = std::make_shared<spdlog::logger>("fuserank",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  const bool json = config.format == LogFormat::kJson;
  g_json.store(json);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<EscapedMessage>('*', json);
  if (json) {
    formatter->set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%f%z","level":"%l","thread":%t,"msg":"%*"})");
  } else {
    formatter->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %*");
  }
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::from_str(config.level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  google::protobuf::SetLogHandler(&ProtobufLog);
  gpr_set_log_function(&GrpcLog);
}

void LogInfoLines(absl::string_view title, absl::string_view text) {
  if (g_json.load()) {
    spdlog::info("{}\n{}", std::string(title), std::string(text));
    return;
  }
  spdlog::info("{}", std::string(title));
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    spdlog::info("  {}", std::string(line));
  }
}

bool AccessLogSampled(double fraction) {
  if (fraction <= 0) return false;
  if (fraction >= 1) return true;
  thread_local std::minstd_rand rng(std::random_device{}());
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < fraction;
}

std::string LogSafe(absl::string_view text, size_t max_bytes) {
  return engine::EscapeText(text, max_bytes);
}

std::string LogQuoted(absl::string_view text, size_t max_bytes) {
  // EscapeText writes a ' only for a ' of the text (a backslash is written \\), so the
  // \x27 that replaces it reads back unambiguously.
  return absl::StrReplaceAll(engine::EscapeText(text, max_bytes), {{"'", "\\x27"}});
}

bool LogRateLimiter::Allow(uint64_t* dropped) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (now - window_start_ >= window_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++dropped_;
    return false;
  }
  ++in_window_;
  *dropped = dropped_;
  dropped_ = 0;
  return true;
}

}  // namespace fuserank::server
