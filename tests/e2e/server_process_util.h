// The real fuserank-server binary as a child process for the load tests that measure the
// server alone (its resident memory, its CPU): started on a config, its output drained by
// a thread (kept for failure messages), its port read from the start log line, stopped
// with SIGTERM. Not thread-safe: one test thread drives it; the readers of /proc are.
#ifndef FUSERANK_TESTS_LOAD_SERVER_PROCESS_UTIL_H_
#define FUSERANK_TESTS_LOAD_SERVER_PROCESS_UTIL_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace fuserank::testing {

class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess();  // Stop()
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts `binary --config config` (optionally pinned with `taskset_cpus`, e.g. "0") and
  // waits up to 60 s for its Ranker port. False (see log()) when it does not come up.
  bool Start(const std::string& binary, const std::string& config,
             const std::string& taskset_cpus = "");
  // SIGTERM, then waits up to 30 s (SIGKILL after); the exit code, or -1.
  int Stop();

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const;

  // From /proc/<pid>/status: VmRSS, and VmHWM (the peak since the last ResetPeak()).
  int64_t ResidentBytes() const;
  int64_t PeakResidentBytes() const;
  // Restarts VmHWM at the current resident size (writes 5 to /proc/<pid>/clear_refs).
  bool ResetPeak() const;
  // User + system CPU seconds the process has used so far.
  double CpuSeconds() const;

 private:
  void Drain(int fd);

  pid_t pid_ = 0;
  int port_ = 0;
  std::thread drain_;
  mutable absl::Mutex mu_;
  std::string log_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_LOAD_SERVER_PROCESS_UTIL_H_
