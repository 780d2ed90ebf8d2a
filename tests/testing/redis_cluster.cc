#include "tests/testing/redis_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fuserank::testing {
namespace {

bool OnPath(const char* program) {
  return std::system(absl::StrCat("command -v ", program, " >/dev/null 2>&1").c_str()) == 0;
}

// A loopback port that is free now, and whose cluster bus port (+10000) is free too.
int FreePort() {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    close(fd);
    if (port == 0 || port + 10000 > 65535) continue;
    const int bus = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_port = htons(static_cast<uint16_t>(port + 10000));
    const bool bus_free = bind(bus, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(bus);
    if (bus_free) return port;
  }
  return 0;
}

absl::StatusOr<std::string> Capture(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("popen: ", command));
  std::string out;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) {
    return absl::InternalError(absl::StrCat("`", command, "` exited ", status, ": ", out));
  }
  return out;
}

}  // namespace

bool RedisCluster::Available() { return OnPath("redis-server") && OnPath("redis-cli"); }

absl::Status RedisCluster::Launch(Process* process) {
  const std::string port = std::to_string(process->port);
  const std::string log = process->dir + "/redis.log";
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // Killed with the test (a crash, a ctest timeout) rather than left behind: the signal
    // comes when the thread that forked exits, the test's own thread here.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    // Not the test's stdout / stderr: a runner reading them must see EOF when the test ends.
    const int null = open("/dev/null", O_RDWR);
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
           "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
           "--cluster-node-timeout", "2000", "--dir", process->dir.c_str(), "--save", "",
           "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no", "--logfile",
           log.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  process->pid = pid;
  // Ours answers, not another redis-server on the port (picked free, then released): the
  // one that answers names its process id.
  const std::string ours = absl::StrCat("process_id:", pid);
  for (int i = 0; i < 400; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) {
      process->pid = -1;
      return absl::UnavailableError(
          absl::StrCat("redis-server on port ", port, " exited at start (see ", log, ")"));
    }
    absl::StatusOr<std::string> info =
        Capture(absl::StrCat("redis-cli -p ", port, " info server 2>&1"));
    if (info.ok() && absl::StrContains(*info, "process_id:")) {
      if (absl::StrContains(*info, ours + "\r") || absl::StrContains(*info, ours + "\n")) {
        return absl::OkStatus();
      }
      // Another process holds the port; ours fails to bind it and exits.
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("redis-server (pid ", pid, ") on port ", port, " did not start"));
}

absl::StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::Start(int masters, int replicas) {
  std::unique_ptr<RedisCluster> cluster(new RedisCluster());
  char pattern[] = "/tmp/fuserank-redis-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return absl::InternalError("mkdtemp failed");
  cluster->root_ = pattern;
  std::string addresses;
  for (int i = 0; i < masters * (1 + replicas); ++i) {
    Process process;
    process.dir = absl::StrCat(cluster->root_, "/node", i);
    std::filesystem::create_directories(process.dir);
    cluster->nodes_.push_back(process);
    // A port free when picked may be taken before redis-server binds it: then another.
    absl::Status launched;
    for (int attempt = 0; attempt < 3; ++attempt) {
      cluster->nodes_.back().port = FreePort();
      if (cluster->nodes_.back().port == 0) return absl::InternalError("no free loopback port");
      launched = cluster->Launch(&cluster->nodes_.back());
      if (!absl::IsUnavailable(launched)) break;
    }
    if (!launched.ok()) return launched;
    absl::StrAppend(&addresses, " 127.0.0.1:", cluster->nodes_.back().port);
  }
  absl::StatusOr<std::string> created =
      Capture(absl::StrCat("redis-cli --cluster create", addresses, " --cluster-replicas ",
                           replicas, " --cluster-yes 2>&1"));
  if (!created.ok()) return created.status();
  if (absl::Status s = cluster->WaitHealthy(); !s.ok()) return s;
  // A replica that has not synced with its master yet would refuse to fail over.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int node = masters; node < cluster->size(); ++node) {
    for (;;) {
      absl::StatusOr<std::string> info = cluster->Cli(node, "info replication");
      if (info.ok() && absl::StrContains(*info, "master_link_status:up")) break;
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError("a replica did not sync with its master");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return cluster;
}

RedisCluster::~RedisCluster() {
  for (Process& process : nodes_) {
    if (process.pid > 0) {
      kill(process.pid, SIGCONT);
      kill(process.pid, SIGKILL);
      waitpid(process.pid, nullptr, 0);
    }
  }
  std::error_code ignored;
  if (!root_.empty()) std::filesystem::remove_all(root_, ignored);
}

std::vector<std::string> RedisCluster::seeds() const {
  std::vector<std::string> out;
  for (const Process& process : nodes_) out.push_back(absl::StrCat("127.0.0.1:", process.port));
  return out;
}

absl::StatusOr<std::string> RedisCluster::Cli(int node, const std::string& args) const {
  return Capture(absl::StrCat("redis-cli -p ", nodes_[node].port, " ", args, " 2>&1"));
}

int RedisCluster::MasterOfSlot(int slot) const {
  for (int node = 0; node < size(); ++node) {
    if (nodes_[node].pid <= 0) continue;
    absl::StatusOr<std::string> slots = Cli(node, "cluster slots");
    if (!slots.ok()) continue;
    // Plain output: start, end, master ip, master port, master id, then replicas.
    std::vector<std::string> lines = absl::StrSplit(*slots, '\n', absl::SkipEmpty());
    for (size_t i = 0; i + 3 < lines.size(); ++i) {
      int first = 0;
      int last = 0;
      int port = 0;
      if (absl::SimpleAtoi(lines[i], &first) && absl::SimpleAtoi(lines[i + 1], &last) &&
          lines[i + 2] == "127.0.0.1" && absl::SimpleAtoi(lines[i + 3], &port) && first <= slot &&
          slot <= last) {
        for (int owner = 0; owner < size(); ++owner) {
          if (nodes_[owner].port == port) return owner;
        }
      }
    }
    return -1;
  }
  return -1;
}

absl::Status RedisCluster::Kill(int node) {
  Process& process = nodes_[node];
  if (process.pid <= 0) return absl::FailedPreconditionError("node is not running");
  kill(process.pid, SIGKILL);
  waitpid(process.pid, nullptr, 0);
  process.pid = -1;
  return absl::OkStatus();
}

absl::Status RedisCluster::Restart(int node) {
  if (nodes_[node].pid > 0) return absl::FailedPreconditionError("node is running");
  return Launch(&nodes_[node]);
}

absl::Status RedisCluster::Pause(int node) {
  return kill(nodes_[node].pid, SIGSTOP) == 0 ? absl::OkStatus()
                                              : absl::InternalError("SIGSTOP failed");
}

absl::Status RedisCluster::Resume(int node) {
  return kill(nodes_[node].pid, SIGCONT) == 0 ? absl::OkStatus()
                                              : absl::InternalError("SIGCONT failed");
}

absl::Status RedisCluster::WaitHealthy(int timeout_ms) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    bool healthy = true;
    for (int node = 0; node < size() && healthy; ++node) {
      if (nodes_[node].pid <= 0) continue;
      absl::StatusOr<std::string> info = Cli(node, "cluster info");
      healthy = info.ok() && absl::StrContains(*info, "cluster_state:ok");
    }
    if (healthy) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError("the cluster did not reach cluster_state:ok");
}

absl::Status RedisCluster::WaitReplicated(int timeout_ms) const {
  // True when `info` (INFO replication) is a replica's, or a master's whose replicas all
  // report its offset ("slave0:ip=...,port=...,state=online,offset=<n>,lag=...").
  auto caught_up = [](const std::string& info) {
    int64_t master_offset = -1;
    bool all = true;
    for (absl::string_view line :
         absl::StrSplit(info, absl::ByAnyChar("\r\n"), absl::SkipEmpty())) {
      if (absl::ConsumePrefix(&line, "master_repl_offset:")) {
        if (!absl::SimpleAtoi(line, &master_offset)) return false;
      }
    }
    if (!absl::StrContains(info, "role:master")) return true;
    for (absl::string_view line :
         absl::StrSplit(info, absl::ByAnyChar("\r\n"), absl::SkipEmpty())) {
      if (!absl::StartsWith(line, "slave") || !absl::StrContains(line, "offset=")) continue;
      const size_t at = line.find("offset=") + 7;
      int64_t offset = -1;
      all = all && absl::SimpleAtoi(line.substr(at, line.find(',', at) - at), &offset) &&
            offset == master_offset;
    }
    return all;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    bool replicated = true;
    for (int node = 0; node < size() && replicated; ++node) {
      if (nodes_[node].pid <= 0) continue;
      absl::StatusOr<std::string> info = Cli(node, "info replication");
      replicated = info.ok() && caught_up(*info);
    }
    if (replicated) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError("the replicas did not catch up with their masters");
}

}  // namespace fuserank::testing
