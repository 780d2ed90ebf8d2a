// The shared state of a ClusterClient: the nodes it knows (each with its pool of idle
// connections), the slot map, and the background thread that refreshes the map. Internal
// to engine/remote. Thread-safe as annotated: the map is read-copy-update (a snapshot
// shared_ptr taken under mu), nodes live until the client is destroyed.
#ifndef FUSERANK_ENGINE_REMOTE_CLUSTER_STATE_H_
#define FUSERANK_ENGINE_REMOTE_CLUSTER_STATE_H_

#include <array>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote/key_slot.h"

struct redisContext;

namespace fuserank::remote {

class Node {
 public:
  Node(std::string host, int port) : host_(std::move(host)), port_(port) {}
  ~Node();
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // An idle connection, or a new non-blocking one (its connect may still be in progress,
  // or have failed: check ->err). Never null.
  redisContext* Acquire();
  // Gives a connection back: kept when `clean` (no reply left unread) and fewer than
  // `pool_size` are idle, else closed.
  void Release(redisContext* context, bool clean, int pool_size);

 private:
  const std::string host_;
  const int port_;
  absl::Mutex mu_;
  std::vector<redisContext*> idle_ ABSL_GUARDED_BY(mu_);
};

struct SlotMap {
  std::array<Node*, kClusterSlots> owner{};  // null: no master known for the slot
};

struct ClusterClient::State {
  explicit State(const ClusterOptions& opts) : options(opts) {}

  // The node at host:port, added when new.
  Node* NodeFor(const std::string& host, int port) ABSL_LOCKS_EXCLUDED(mu);
  std::shared_ptr<const SlotMap> Map() const ABSL_LOCKS_EXCLUDED(mu);
  // After a MOVED: the slot's new owner, at once (copy-on-write of the map).
  void SetSlot(int slot, Node* node) ABSL_LOCKS_EXCLUDED(mu);
  // Wakes the refresher for a CLUSTER SLOTS round.
  void RequestRefresh() ABSL_LOCKS_EXCLUDED(mu);
  // One CLUSTER SLOTS round over the known nodes, then the seeds; installs the first map
  // read. Blocking (connect_timeout per node).
  absl::Status Refresh() ABSL_LOCKS_EXCLUDED(mu);
  void RefresherLoop() ABSL_LOCKS_EXCLUDED(mu);
  void Stop() ABSL_LOCKS_EXCLUDED(mu);

  const ClusterOptions options;
  mutable absl::Mutex mu;
  std::vector<std::unique_ptr<Node>> nodes ABSL_GUARDED_BY(mu);
  std::shared_ptr<const SlotMap> map ABSL_GUARDED_BY(mu);
  bool refresh_wanted ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::thread refresher;
};

// Splits "host:port"; false when it is not of that form (port 1..65535).
bool ParseAddress(std::string_view address, std::string* host, int* port);

}  // namespace fuserank::remote

#endif  // FUSERANK_ENGINE_REMOTE_CLUSTER_STATE_H_
