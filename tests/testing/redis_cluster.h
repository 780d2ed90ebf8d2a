// A Redis Cluster of real redis-server processes on loopback for tests: masters (and
// optional replicas) on free ports, each in its own folder under a private temp dir, joined
// with `redis-cli --cluster create`. The destructor kills the processes it started (by PID,
// only those) and removes the folder. One thread at a time.
#ifndef FUSERANK_TESTS_TESTING_REDIS_CLUSTER_H_
#define FUSERANK_TESTS_TESTING_REDIS_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fuserank::testing {

class RedisCluster {
 public:
  // True when redis-server and redis-cli are on PATH (scripts/install-deps.sh installs
  // them); tests GTEST_SKIP with kMissingMessage otherwise.
  static bool Available();
  static constexpr const char* kMissingMessage =
      "redis-server / redis-cli not installed (scripts/install-deps.sh installs them)";

  // Starts `masters` masters with `replicas` replicas each and waits for cluster_state:ok.
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Start(int masters = 3, int replicas = 0);
  ~RedisCluster();

  int size() const { return static_cast<int>(nodes_.size()); }
  int port(int node) const { return nodes_[node].port; }
  // "127.0.0.1:<port>" of every node.
  std::vector<std::string> seeds() const;
  // Runs `redis-cli -p <port of node> <args>` (args pass through a shell: quote them) and
  // returns its stdout.
  absl::StatusOr<std::string> Cli(int node, const std::string& args) const;
  // The node (index) that serves `slot` as master now, or -1.
  int MasterOfSlot(int slot) const;

  absl::Status Kill(int node);     // SIGKILL and reap
  absl::Status Restart(int node);  // the same port and folder (its nodes.conf kept)
  absl::Status Pause(int node);    // SIGSTOP: a node that accepts but never answers
  absl::Status Resume(int node);   // SIGCONT
  // Waits until every running node reports cluster_state:ok.
  absl::Status WaitHealthy(int timeout_ms = 20000) const;
  // Waits until every running master's replicas have acknowledged all it has written
  // (their offsets in its INFO replication equal its master_repl_offset).
  absl::Status WaitReplicated(int timeout_ms = 20000) const;

 private:
  struct Process {
    int port = 0;
    pid_t pid = -1;
    std::string dir;
  };
  RedisCluster() = default;
  absl::Status Launch(Process* process);

  std::string root_;
  std::vector<Process> nodes_;
};

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_TESTING_REDIS_CLUSTER_H_
