// The shared state of a ClusterClient: the nodes it knows (each with its pool of idle
// connections and, for a host name, the addresses it last resolved to), the slot map, and
// the background thread that refreshes the map and resolves host names, so that nothing on
// a batch's path waits for DNS. Internal to engine/remote. Thread-safe as annotated: the
// map is read-copy-update (a snapshot shared_ptr taken under mu) and holds its nodes; a
// refresh forgets the nodes the new map does not name (a batch still using one holds it).
#ifndef FUSERANK_ENGINE_REMOTE_CLUSTER_STATE_H_
#define FUSERANK_ENGINE_REMOTE_CLUSTER_STATE_H_

#include <array>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote/key_slot.h"

struct redisContext;
struct redisReply;

namespace fuserank::remote {

// The most nodes a client knows at once: a map's masters, and those MOVED redirects named
// since the last refresh (which forgets the nodes its map does not name).
inline constexpr int kMaxNodes = 4096;

class Node {
 public:
  Node(std::string host, int port);
  ~Node();
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // An idle connection that is still open with nothing unread, or a new non-blocking one
  // (its connect may still be in progress, or have failed: check ->err). Null when the host
  // is a name not resolved yet (the refresher resolves it).
  redisContext* Acquire();
  // Gives a connection back: kept when `clean` (every reply read, nothing more buffered)
  // and fewer than `pool_size` are idle, else closed. A connection that failed moves a host
  // name on to its next address for the connections after it.
  void Release(redisContext* context, bool clean, int pool_size);
  // Looks the host name up (blocking: the refresher's thread only); an IP literal needs
  // nothing. A failed lookup keeps the last addresses. Acquire dials the current one.
  void Resolve();
  bool is_literal() const { return literal_; }

 private:
  const std::string host_;
  const int port_;
  const bool literal_;
  absl::Mutex mu_;
  std::vector<redisContext*> idle_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);  // numeric; none until resolved
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;                  // the one Acquire dials
};

struct SlotMap {
  std::array<Node*, kClusterSlots> owner{};  // null: no master known for the slot
  std::vector<std::shared_ptr<Node>> nodes;  // every owner, alive while the map is
};

// One range of a CLUSTER SLOTS reply: slots first..last and their master.
struct SlotRange {
  int first = 0;
  int last = 0;
  std::string host;
  int port = 0;
};

struct ClusterClient::State {
  explicit State(const ClusterOptions& opts) : options(opts) {}

  // The node at host:port, added when new; null when kMaxNodes are known already.
  std::shared_ptr<Node> NodeFor(const std::string& host, int port) ABSL_LOCKS_EXCLUDED(mu);
  std::shared_ptr<const SlotMap> Map() const ABSL_LOCKS_EXCLUDED(mu);
  // After a MOVED: the slot's new owner, at once (copy-on-write of the map).
  void SetSlot(int slot, const std::shared_ptr<Node>& node) ABSL_LOCKS_EXCLUDED(mu);
  // Installs the map of `ranges`; its masters become the nodes known (the others are
  // forgotten). RESOURCE_EXHAUSTED, nothing changed, past kMaxNodes masters; INTERNAL for
  // ranges that overlap. Built before mu is taken: a Run() waits only for the swap.
  absl::Status InstallMap(const std::vector<SlotRange>& ranges) ABSL_LOCKS_EXCLUDED(mu);
  // Wakes the refresher for a CLUSTER SLOTS round.
  void RequestRefresh() ABSL_LOCKS_EXCLUDED(mu);
  // One CLUSTER SLOTS round: the nodes of the current map first, then the seeds, then the
  // other nodes known. Installs the first map that covers every slot, else the one that
  // covers the most (a cluster may serve with slots uncovered); a map that covers none is a
  // failure. Then resolves the host names. Blocking: connect_timeout per node tried, for
  // connecting and the whole reply.
  absl::Status Refresh() ABSL_LOCKS_EXCLUDED(mu);
  absl::Status RefreshMap() ABSL_LOCKS_EXCLUDED(mu);
  // Whom Refresh asks, in order, each once.
  std::vector<std::pair<std::string, int>> RefreshCandidates() const ABSL_LOCKS_EXCLUDED(mu);
  void RefresherLoop() ABSL_LOCKS_EXCLUDED(mu);
  void Stop() ABSL_LOCKS_EXCLUDED(mu);

  const ClusterOptions options;
  mutable absl::Mutex mu;
  std::vector<std::shared_ptr<Node>> nodes ABSL_GUARDED_BY(mu);
  std::shared_ptr<const SlotMap> map ABSL_GUARDED_BY(mu);
  bool refresh_wanted ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::thread refresher;
};

// Splits "host:port"; false when it is not of that form (port 1..65535).
bool ParseAddress(std::string_view address, std::string* host, int* port);

// Parses "MOVED 3999 127.0.0.1:6381" (or ASK ...) into slot and node address. Redis 7
// writes ":6381" for "the host of the node you asked" (`asked`), and "?:6381" when it does
// not know the endpoint (*host is then "?"). IPv6 comes bare ("::1:6381").
bool ParseRedirect(std::string_view error, const std::string& asked, int* slot, std::string* host,
                   int* port);

// Reads a CLUSTER SLOTS reply into ranges. A NULL or empty endpoint is `asked` (the node
// the command went to); a "?" endpoint's range is left out (an unknown node). Ranges that
// overlap are refused (so they never sum past 16,384 slots). *covered counts the slots the
// ranges assign.
absl::Status ParseSlots(const redisReply& reply, const std::string& asked,
                        std::vector<SlotRange>* ranges, int* covered);

}  // namespace fuserank::remote

#endif  // FUSERANK_ENGINE_REMOTE_CLUSTER_STATE_H_
