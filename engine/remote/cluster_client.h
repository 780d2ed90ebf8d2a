// A Redis Cluster client for key-addressed reads and writes, routed as the cluster
// specification says: a slot map from CLUSTER SLOTS (refreshed in the background after a
// MOVED, a connection error, and every refresh_interval), MOVED answered by retrying at the
// named node (and refreshing the map), ASK by ASKING plus a retry there, without touching
// the map. One Run() sends its commands as one pipeline per node, every node at once over
// non-blocking sockets, and returns by its deadline whatever has not answered by then.
// What a node sends is bounded (engine/remote/resp_frame.h), and nothing on Run()'s path
// resolves a host name: the background refresher does.
// Thread-safe: any number of Run() calls may proceed at once (each uses its own
// connections, taken from a per-node pool of idle ones).
#ifndef FUSERANK_ENGINE_REMOTE_CLUSTER_CLIENT_H_
#define FUSERANK_ENGINE_REMOTE_CLUSTER_CLIENT_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fuserank::remote {

struct ClusterOptions {
  std::vector<std::string> seeds;                    // "host:port" of any nodes of the cluster
  int pool_size = 4;                                 // idle connections kept open per node
  std::chrono::milliseconds connect_timeout{500};    // map refreshes (background)
  std::chrono::milliseconds refresh_interval{1000};  // periodic CLUSTER SLOTS
  // MOVED / ASK followed per key within one Run() (a slot being handed over may bounce a
  // key between its old and new owner until both agree).
  int max_redirects = 5;
  // The longest value a GET may return: a longer bulk string fails its node's pipeline
  // (ErrorKind::kServer) as soon as its length arrives, instead of being buffered.
  size_t max_value_bytes = 1 << 20;
  // The most bytes one Run() keeps in Reply::value (GETs without Command::out): a value
  // past it is an error of kind kServer, not kept. GETs with `out` write only there.
  size_t max_run_value_bytes = size_t{64} << 20;
};

// Why a command got no answer.
enum class ErrorKind { kNone, kTimeout, kConnection, kRedirect, kClusterDown, kServer, kValueSize };
inline constexpr int kErrorKinds = 7;
std::string_view ErrorKindName(ErrorKind kind);  // "timeout", "connection", ...

// One command: GET key, or SET key value.
struct Command {
  Command() = default;
  Command(std::string_view key, std::string_view value = {}, bool set = false,
          absl::Span<std::byte> out = {})
      : key(key), value(value), set(set), out(out) {}

  std::string_view key;
  std::string_view value;  // SET only
  bool set = false;
  // GET: where the value goes, exactly out.size() bytes. A value of another length is an
  // error of kind kValueSize, its bytes dropped as they arrive (never buffered whole; the
  // connection goes on to the next reply). Empty: the value goes to Reply::value, any
  // length up to ClusterOptions::max_value_bytes.
  absl::Span<std::byte> out;
};

struct Reply {
  enum class State { kValue, kAbsent, kError };
  State state = State::kError;
  ErrorKind error = ErrorKind::kNone;
  // GET without Command::out: the value. Its capacity never exceeds the value it holds
  // (beyond the string's inline buffer), so replies reused across runs keep no more.
  std::string value;
  size_t announced_bytes = 0;  // kValueSize: the length the node sent
};

struct RunStats {
  int round_trips = 0;  // node pipelines sent (redirect retries included)
  int moved = 0;
  int ask = 0;
  std::array<int, kErrorKinds> errors{};  // commands left without an answer, by kind
};

class ClusterClient {
 public:
  // Connects to the seeds until one answers CLUSTER SLOTS. When none does, the client is
  // still returned in *client (its refresher keeps trying) and the status says why, so a
  // caller may start anyway and serve without the cluster.
  static absl::Status Create(const ClusterOptions& options, std::unique_ptr<ClusterClient>* client);
  ~ClusterClient();

  // Runs `commands` and writes replies[i] for commands[i] (replies is resized). Returns by
  // `deadline`: what has not answered by then is an error of kind kTimeout.
  RunStats Run(absl::Span<const Command> commands, std::chrono::steady_clock::time_point deadline,
               std::vector<Reply>* replies);

  // Nodes known and the slots the map assigns (tests, logs).
  int known_nodes() const;
  bool has_map() const;
  // Refreshes the map now (blocking, connect_timeout per node tried). Tests, start.
  absl::Status RefreshMap();

  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  // Internal to engine/remote (cluster_state.h, cluster_client.cc).
  struct State;
  struct RunContext;

 private:
  explicit ClusterClient(const ClusterOptions& options);
  std::unique_ptr<State> state_;
};

}  // namespace fuserank::remote

#endif  // FUSERANK_ENGINE_REMOTE_CLUSTER_CLIENT_H_
