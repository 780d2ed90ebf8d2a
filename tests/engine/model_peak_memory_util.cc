#include "tests/engine/model_peak_memory_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <string>

namespace fuserank::engine::test {
namespace {

// The value of `field` ("VmRSS", "VmHWM") in /proc/self/status, in bytes; -1 if absent.
int64_t StatusBytes(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stoll(line.substr(prefix.size())) * 1024;
  }
  return -1;
}

// Resets the peak (VmHWM) to the current resident memory; false if the kernel cannot.
bool ResetPeak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}

}  // namespace

std::optional<int64_t> PeakMemoryGrowth(const std::function<void()>& f) {
  int fds[2];
  if (::pipe(fds) != 0) return std::nullopt;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::close(fds[0]);
    int64_t growth = -1;
    if (ResetPeak()) {
      const int64_t before = StatusBytes("VmRSS");
      f();
      const int64_t peak = StatusBytes("VmHWM");
      if (before >= 0 && peak >= 0) growth = peak - before;
    }
    const ssize_t written = ::write(fds[1], &growth, sizeof(growth));
    ::_exit(written == sizeof(growth) ? 0 : 1);
  }
  ::close(fds[1]);
  int64_t growth = -1;
  const ssize_t got = ::read(fds[0], &growth, sizeof(growth));
  ::close(fds[0]);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  // A child that died before reporting (out of memory, a crash) took more than it may.
  if (got != sizeof(growth) || !WIFEXITED(wstatus)) return std::numeric_limits<int64_t>::max();
  if (growth < 0) return std::nullopt;
  return growth;
}

}  // namespace fuserank::engine::test
