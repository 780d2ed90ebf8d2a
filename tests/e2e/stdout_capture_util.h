// What an in-process server logs: spdlog's default logger (of the server library, whose
// registry a test file cannot reach) writes to stdout, which StdoutCapture sends to a file
// while it lives and then writes back to stdout, so a failing test still shows the log.
// One capture at a time per process; not thread-safe.
#ifndef FUSERANK_TESTS_E2E_STDOUT_CAPTURE_UTIL_H_
#define FUSERANK_TESTS_E2E_STDOUT_CAPTURE_UTIL_H_

#include <string>
#include <vector>

namespace fuserank::testing {

class StdoutCapture {
 public:
  // Captures into `path` (created or truncated).
  explicit StdoutCapture(std::string path);
  ~StdoutCapture() { Stop(); }
  StdoutCapture(const StdoutCapture&) = delete;
  StdoutCapture& operator=(const StdoutCapture&) = delete;

  // What was captured so far.
  std::string Text() const;
  // Restores stdout (once) and writes what was captured to it; returns that.
  std::string Stop();

 private:
  std::string path_;
  int saved_ = -1;
};

// The line of `text` that contains `marker`, or "".
std::string LineWith(const std::string& text, const std::string& marker);

// Every line of `text` that contains `marker`, from the marker on.
std::vector<std::string> LinesFrom(const std::string& text, const std::string& marker);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_STDOUT_CAPTURE_UTIL_H_
