// The real fuserank-server binary as a child process, for the e2e tests of the binary
// itself (flags, exit codes, signals, logs) and the load tests that measure the server
// alone (its resident memory, its CPU). RunServerToExit runs it to its end; ServerProcess
// starts it on a config, drains its output with a thread (kept for failure messages),
// reads its ports from the start log line and stops it with SIGTERM. Not thread-safe: one
// test thread drives a ServerProcess; the readers of /proc are.
#ifndef FUSERANK_TESTS_E2E_SERVER_PROCESS_UTIL_H_
#define FUSERANK_TESTS_E2E_SERVER_PROCESS_UTIL_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace fuserank::testing {

// The binary of this build.
inline constexpr char kServerBinary[] = FUSERANK_BINARY_DIR "/bin/fuserank-server";

struct ServerRun {
  int exit_code = -1;  // -1: killed by a signal, or not started
  std::string output;  // stdout and stderr
};

// The fuserank-gen-model command that writes, at `spec_path`, a model whose load takes
// the server seconds (two tables of 500k rows x 64 floats, 256 MB; under ThreadSanitizer,
// which slows the load about tenfold, 100k rows), for tests of what happens during a load.
std::string LargeModelCommand(const std::string& spec_path);

// Runs `kServerBinary <args>` through the shell (args are shell words) until it exits.
ServerRun RunServerToExit(const std::string& args);

class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess();  // Stop()
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts `binary --config config` (optionally pinned with `taskset_cpus`, e.g. "0") and
  // waits up to `start_timeout` for its Ranker port. False (see log()) when it does not
  // come up.
  bool Start(const std::string& binary, const std::string& config,
             const std::string& taskset_cpus = "",
             std::chrono::seconds start_timeout = std::chrono::seconds(60));
  // Sends SIGTERM; false when no child runs or the signal could not be sent.
  bool Terminate();
  // Waits up to `timeout` for the child to exit (SIGKILL after: timed_out() then tells)
  // and for its whole output; the exit code, or -1 (killed by a signal, or none ran).
  int Wait(std::chrono::seconds timeout);
  // Terminate(), then Wait(30 s).
  int Stop();
  bool timed_out() const { return timed_out_; }

  int port() const { return port_; }
  int admin_port() const { return admin_port_; }  // 0 when admin_listen is off
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
  int admin_port_ = 0;
  bool timed_out_ = false;
  std::thread drain_;
  mutable absl::Mutex mu_;
  std::string log_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_SERVER_PROCESS_UTIL_H_
