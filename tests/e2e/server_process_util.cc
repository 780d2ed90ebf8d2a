#include "tests/e2e/server_process_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace fuserank::testing {
namespace {

// "VmRSS:    1234 kB" -> bytes; 0 when the field is missing.
int64_t StatusField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size(), field) != 0 || line[field.size()] != ':') continue;
    std::istringstream value(line.substr(field.size() + 1));
    int64_t kb = 0;
    value >> kb;
    return kb * 1024;
  }
  return 0;
}

}  // namespace

std::string LargeModelCommand(const std::string& spec_path) {
#if defined(__SANITIZE_THREAD__)
  constexpr int kRows = 100000;
#else
  constexpr int kRows = 500000;
#endif
  return absl::StrCat(FUSERANK_BINARY_DIR "/bin/fuserank-gen-model --out ", spec_path, " --rows ",
                      kRows, " --dim 64 --top_mlp 32,1 > /dev/null");
}

ServerRun RunServerToExit(const std::string& args) {
  ServerRun run;
  FILE* pipe = popen((std::string(kServerBinary) + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) run.output.append(buffer, n);
  const int status = pclose(pipe);
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

ServerProcess::~ServerProcess() { Stop(); }

bool ServerProcess::Start(const std::string& binary, const std::string& config,
                          const std::string& taskset_cpus, std::chrono::seconds start_timeout) {
  int fds[2];
  // Close-on-exec: another child started meanwhile must not hold this one's pipe open.
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Killed with the test (a crash, a ctest timeout) rather than left serving: the signal
    // comes when the thread that forked exits (the test's); it survives the exec.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    dup2(fds[1], STDOUT_FILENO);  // the copies are not close-on-exec
    dup2(fds[1], STDERR_FILENO);
    if (!taskset_cpus.empty()) {
      execlp("taskset", "taskset", "-c", taskset_cpus.c_str(), binary.c_str(), "--config",
             config.c_str(), static_cast<char*>(nullptr));
    } else {
      execl(binary.c_str(), binary.c_str(), "--config", config.c_str(),
            static_cast<char*>(nullptr));
    }
    _exit(127);
  }
  close(fds[1]);
  if (pid_ < 0) {
    close(fds[0]);
    pid_ = 0;
    return false;
  }
  drain_ = std::thread([this, fd = fds[0]] { Drain(fd); });
  // One line names every port: "serving fuserank.v1.Ranker on <address> (port <n>) ...;
  // admin: <address> (port <n>) | off; ...".
  const std::regex serving(R"(serving fuserank.v1.Ranker on \S+ \(port (\d+)\))");
  const std::regex admin(R"(admin: \S+ \(port (\d+)\))");
  const auto deadline = std::chrono::steady_clock::now() + start_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch match;
    const std::string text = log();
    if (std::regex_search(text, match, serving)) {
      port_ = std::stoi(match[1]);
      if (std::regex_search(text, match, admin)) admin_port_ = std::stoi(match[1]);
      return true;
    }
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {  // exited: nothing to stop
      pid_ = 0;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool ServerProcess::Terminate() { return pid_ > 0 && kill(pid_, SIGTERM) == 0; }

int ServerProcess::Wait(std::chrono::seconds timeout) {
  int code = -1;
  timed_out_ = false;
  if (pid_ > 0) {
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    pid_t done = 0;
    while ((done = waitpid(pid_, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (done == 0) {
      timed_out_ = true;
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    } else if (WIFEXITED(status)) {
      code = WEXITSTATUS(status);
    }
    pid_ = 0;
  }
  if (drain_.joinable()) drain_.join();  // the pipe closes with the child
  return code;
}

int ServerProcess::Stop() {
  Terminate();
  return Wait(std::chrono::seconds(30));
}

void ServerProcess::Drain(int fd) {
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) {
    absl::MutexLock lock(&mu_);
    log_.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
}

std::string ServerProcess::log() const {
  absl::MutexLock lock(&mu_);
  return log_;
}

int64_t ServerProcess::ResidentBytes() const { return StatusField(pid_, "VmRSS"); }
int64_t ServerProcess::PeakResidentBytes() const { return StatusField(pid_, "VmHWM"); }

bool ServerProcess::ResetPeak() const {
  std::ofstream out("/proc/" + std::to_string(pid_) + "/clear_refs");
  out << "5";
  return static_cast<bool>(out.flush());
}

double ServerProcess::CpuSeconds() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces): state is field 3, utime 14.
  const size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(close_paren + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;
  long utime = 0;
  long stime = 0;
  fields >> utime >> stime;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace fuserank::testing
