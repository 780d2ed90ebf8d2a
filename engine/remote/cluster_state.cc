#include "engine/remote/cluster_state.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "engine/remote/node_call.h"
#include "engine/remote/resp_frame.h"

namespace fuserank::remote {
namespace {

constexpr absl::Duration kMinRefreshGap = absl::Milliseconds(100);

// What a CLUSTER SLOTS reply may hold: a range per slot at most, each with its master, its
// replicas and (Redis 7) their metadata.
RespLimits SlotsLimits() {
  RespLimits limits;
  limits.max_line = 4096;
  limits.max_bulk = 4096;  // host names, node ids, metadata values
  limits.max_elements = kClusterSlots;
  limits.max_total_elements = 1 << 20;
  limits.max_depth = 4;
  return limits;
}

bool IsIpLiteral(const std::string& host) {
  in6_addr address;
  return inet_pton(AF_INET, host.c_str(), &address) == 1 ||
         inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

// Idle and still usable: open, and nothing to read (a closed peer reads as end of file).
bool StillOpen(const redisContext* c) {
  pollfd p{c->fd, POLLIN, 0};
  return c->err == 0 && poll(&p, 1, 0) == 0;
}

}  // namespace

absl::Status ParseSlots(const redisReply& reply, const std::string& asked,
                        std::vector<SlotRange>* ranges, int* covered) {
  if (reply.type != REDIS_REPLY_ARRAY) return absl::InternalError("CLUSTER SLOTS: not an array");
  std::vector<bool> seen(kClusterSlots);
  *covered = 0;
  for (size_t i = 0; i < reply.elements; ++i) {
    const redisReply& range = *reply.element[i];
    if (range.type != REDIS_REPLY_ARRAY || range.elements < 3 ||
        range.element[0]->type != REDIS_REPLY_INTEGER ||
        range.element[1]->type != REDIS_REPLY_INTEGER ||
        range.element[2]->type != REDIS_REPLY_ARRAY || range.element[2]->elements < 2 ||
        (range.element[2]->element[0]->type != REDIS_REPLY_STRING &&
         range.element[2]->element[0]->type != REDIS_REPLY_NIL) ||
        range.element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
      return absl::InternalError("CLUSTER SLOTS: malformed slot range");
    }
    const long long first = range.element[0]->integer;
    const long long last = range.element[1]->integer;
    if (first < 0 || last >= kClusterSlots || first > last) {
      return absl::InternalError("CLUSTER SLOTS: slot range out of bounds");
    }
    // Each slot once: ranges that overlap are no map a cluster gives, and refused at the
    // first slot seen twice, so this costs at most 16,384 steps whatever the node sends.
    for (long long s = first; s <= last; ++s) {
      if (seen[s]) {
        return absl::InternalError(
            absl::StrCat("CLUSTER SLOTS: slot ranges overlap (slot ", s, " twice)"));
      }
      seen[s] = true;
    }
    const redisReply& master = *range.element[2];
    const long long port = master.element[1]->integer;
    if (port < 1 || port > 65535) return absl::InternalError("CLUSTER SLOTS: port out of range");
    // The endpoint, as https://redis.io/commands/cluster-slots/ defines it: NULL (Redis 7's
    // cluster-preferred-endpoint-type unknown-endpoint) means "the endpoint the CLUSTER
    // SLOTS command was sent to, with the port given"; an empty string (a node that does
    // not know its own address) "may be treated the same way as NULL"; "?" (hostnames
    // announced but none configured) is "an unknown node, not necessarily the same node":
    // its slots are left unassigned in this map (their keys fail as cluster_down and ask
    // for a refresh).
    const redisReply& endpoint = *master.element[0];
    std::string host =
        endpoint.type == REDIS_REPLY_NIL ? std::string() : std::string(endpoint.str, endpoint.len);
    if (host == "?") continue;
    if (host.empty()) host = asked;
    ranges->push_back(
        {static_cast<int>(first), static_cast<int>(last), std::move(host), static_cast<int>(port)});
    *covered += static_cast<int>(last - first + 1);
  }
  return absl::OkStatus();
}

bool ParseRedirect(std::string_view error, const std::string& asked, int* slot, std::string* host,
                   int* port) {
  const size_t first = error.find(' ');
  const size_t second = first == std::string_view::npos ? first : error.find(' ', first + 1);
  if (second == std::string_view::npos) return false;
  const std::string_view digits = error.substr(first + 1, second - first - 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *slot);
  if (ec != std::errc() || end != digits.data() + digits.size() || *slot < 0 ||
      *slot >= kClusterSlots) {
    return false;
  }
  const std::string_view address = error.substr(second + 1);
  // ":6381" alone (one colon) is the short form; "::1:6381" is IPv6.
  if (address.starts_with(':') && address.find(':', 1) == std::string_view::npos) {
    return ParseAddress(asked + std::string(address), host, port);
  }
  return ParseAddress(address, host, port);
}

bool ParseAddress(std::string_view address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view digits = address.substr(colon + 1);
  int value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || value < 1 || value > 65535) {
    return false;
  }
  std::string_view name = address.substr(0, colon);
  // "[::1]:6379" as remote.seed_nodes writes IPv6 (hiredis wants the bare address);
  // MOVED replies and CLUSTER SLOTS give it bare.
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  if (name.empty()) return false;
  host->assign(name);
  *port = value;
  return true;
}

Node::Node(std::string host, int port)
    : host_(std::move(host)), port_(port), literal_(IsIpLiteral(host_)) {
  if (literal_) addresses_ = {host_};
}

Node::~Node() {
  absl::MutexLock lock(&mu_);
  for (redisContext* c : idle_) redisFree(c);
}

redisContext* Node::Acquire() {
  std::vector<std::string> addresses;  // the current one
  {
    absl::MutexLock lock(&mu_);
    while (!idle_.empty()) {
      redisContext* c = idle_.back();
      idle_.pop_back();
      if (StillOpen(c)) return c;
      redisFree(c);  // the node closed it (an idle timeout, a restart)
    }
    if (!addresses_.empty()) addresses.push_back(addresses_[current_ % addresses_.size()]);
  }
  if (addresses.empty()) return nullptr;
  return redisConnectNonBlock(addresses.front().c_str(), port_);
}

void Node::Resolve() {
  if (literal_) return;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host_.c_str(), nullptr, &hints, &found) != 0) return;
  std::vector<std::string> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = a->ai_family == AF_INET6
                          ? static_cast<const void*>(
                                &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr)
                          : &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
    if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
        inet_ntop(a->ai_family, raw, text, sizeof(text)) != nullptr &&
        std::find(addresses.begin(), addresses.end(), text) == addresses.end()) {
      addresses.emplace_back(text);
    }
  }
  freeaddrinfo(found);
  if (addresses.empty()) return;
  absl::MutexLock lock(&mu_);
  if (addresses != addresses_) current_ = 0;
  addresses_ = std::move(addresses);
}

void Node::Release(redisContext* context, bool clean, int pool_size) {
  if (context == nullptr) return;
  // A reply hiredis has buffered but nobody read would answer the next batch's command.
  const bool drained = context->reader->pos == context->reader->len;
  {
    absl::MutexLock lock(&mu_);
    if (clean && drained && context->err == 0 && static_cast<int>(idle_.size()) < pool_size) {
      idle_.push_back(context);
      return;
    }
    if (context->err != 0) ++current_;  // a host name's other addresses get their turn
  }
  redisFree(context);
}

std::shared_ptr<Node> ClusterClient::State::NodeFor(const std::string& host, int port) {
  absl::MutexLock lock(&mu);
  for (const auto& node : nodes) {
    if (node->port() == port && node->host() == host) return node;
  }
  if (static_cast<int>(nodes.size()) >= kMaxNodes) return nullptr;
  nodes.push_back(std::make_shared<Node>(host, port));
  return nodes.back();
}

absl::Status ClusterClient::State::InstallMap(const std::vector<SlotRange>& ranges) {
  // The map is built before mu is taken (every Run() takes it for its snapshot), from a
  // copy of the nodes known: a node a MOVED adds meanwhile is one the new map would forget
  // anyway, and the one a batch holds stays alive with it.
  std::vector<std::shared_ptr<Node>> known;
  {
    absl::MutexLock lock(&mu);
    known = nodes;
  }
  absl::flat_hash_map<std::pair<std::string, int>, std::shared_ptr<Node>> by_address;
  for (const auto& node : known) by_address.try_emplace({node->host(), node->port()}, node);
  absl::flat_hash_map<std::pair<std::string, int>, Node*> masters;
  auto next = std::make_shared<SlotMap>();
  for (const SlotRange& range : ranges) {
    auto [master, added] = masters.try_emplace({range.host, range.port}, nullptr);
    if (added) {
      if (next->nodes.size() == static_cast<size_t>(kMaxNodes)) {
        return absl::ResourceExhaustedError(
            absl::StrCat("CLUSTER SLOTS: more than ", kMaxNodes, " masters"));
      }
      auto registered = by_address.find(master->first);
      next->nodes.push_back(registered != by_address.end()
                                ? registered->second
                                : std::make_shared<Node>(range.host, range.port));
      master->second = next->nodes.back().get();
    }
    for (int s = range.first; s <= range.last; ++s) {
      // Each slot once (ParseSlots refused overlaps already): at most 16,384 steps.
      if (next->owner[s] != nullptr) {
        return absl::InternalError(absl::StrCat("CLUSTER SLOTS: slot ", s, " twice"));
      }
      next->owner[s] = master->second;
    }
  }
  absl::MutexLock lock(&mu);
  // The nodes are the map's from now on: the others are forgotten (a batch still using one
  // holds it until it is done).
  nodes = next->nodes;
  map = std::move(next);
  return absl::OkStatus();
}

std::shared_ptr<const SlotMap> ClusterClient::State::Map() const {
  absl::MutexLock lock(&mu);
  return map;
}

void ClusterClient::State::SetSlot(int slot, const std::shared_ptr<Node>& node) {
  absl::MutexLock lock(&mu);
  if (map != nullptr && map->owner[slot] == node.get()) return;  // told already (another key)
  auto updated = map == nullptr ? std::make_shared<SlotMap>() : std::make_shared<SlotMap>(*map);
  updated->owner[slot] = node.get();
  if (std::find(updated->nodes.begin(), updated->nodes.end(), node) == updated->nodes.end()) {
    updated->nodes.push_back(node);
  }
  map = std::move(updated);
}

void ClusterClient::State::RequestRefresh() {
  absl::MutexLock lock(&mu);
  refresh_wanted = true;
}

std::vector<std::pair<std::string, int>> ClusterClient::State::RefreshCandidates() const {
  std::vector<std::pair<std::string, int>> candidates;
  auto add = [&candidates](const std::string& host, int port) {
    const std::pair<std::string, int> candidate(host, port);
    if (std::find(candidates.begin(), candidates.end(), candidate) == candidates.end()) {
      candidates.push_back(candidate);
    }
  };
  absl::MutexLock lock(&mu);
  if (map != nullptr) {
    for (const auto& node : map->nodes) add(node->host(), node->port());
  }
  for (const std::string& seed : options.seeds) {
    std::string host;
    int port = 0;
    if (ParseAddress(seed, &host, &port)) add(host, port);
  }
  for (const auto& node : nodes) add(node->host(), node->port());
  return candidates;
}

absl::Status ClusterClient::State::Refresh() {
  absl::Status status = RefreshMap();
  std::vector<std::shared_ptr<Node>> named;
  {
    absl::MutexLock lock(&mu);
    for (const auto& node : nodes) {
      if (!node->is_literal()) named.push_back(node);
    }
  }
  for (const auto& node : named) node->Resolve();
  return status;
}

absl::Status ClusterClient::State::RefreshMap() {
  const std::vector<std::pair<std::string, int>> candidates = RefreshCandidates();
  if (candidates.empty()) return absl::InvalidArgumentError("no seed node given");
  std::vector<std::string> failures;
  std::vector<SlotRange> best;
  int best_covered = 0;
  for (const auto& [host, port] : candidates) {
    {
      absl::MutexLock lock(&mu);
      if (stopping) return absl::CancelledError("the client is stopping");
    }
    const auto deadline = std::chrono::steady_clock::now() + options.connect_timeout;
    absl::StatusOr<ReplyPtr> reply = CallNode(host, port, "CLUSTER SLOTS", deadline, SlotsLimits());
    absl::Status parsed = reply.status();
    std::vector<SlotRange> ranges;
    int covered = 0;
    if (parsed.ok() && (*reply)->type == REDIS_REPLY_ERROR) {
      parsed = absl::UnavailableError(absl::string_view((*reply)->str, (*reply)->len));
    } else if (parsed.ok()) {
      parsed = ParseSlots(**reply, host, &ranges, &covered);
    }
    if (parsed.ok() && covered == 0) parsed = absl::UnavailableError("its map covers no slot");
    if (!parsed.ok()) {
      failures.push_back(absl::StrCat(host, ":", port, ": ", parsed.message()));
      continue;
    }
    if (covered > best_covered) {
      best = std::move(ranges);
      best_covered = covered;
    }
    if (best_covered == kClusterSlots) break;
  }
  if (best_covered == 0) {
    return absl::UnavailableError(
        absl::StrCat("no node answered CLUSTER SLOTS (", absl::StrJoin(failures, "; "), ")"));
  }
  return InstallMap(best);
}

void ClusterClient::State::RefresherLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu);
      auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return stopping || refresh_wanted; };
      mu.AwaitWithTimeout(absl::Condition(&woken),
                          absl::Milliseconds(options.refresh_interval.count()));
      if (stopping) return;
      refresh_wanted = false;
    }
    Refresh().IgnoreError();  // a failed round is retried at the next wake-up
    // At most one round per kMinRefreshGap, however many batches ask for one.
    absl::MutexLock lock(&mu);
    auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return stopping; };
    mu.AwaitWithTimeout(absl::Condition(&stop), kMinRefreshGap);
  }
}

void ClusterClient::State::Stop() {
  {
    absl::MutexLock lock(&mu);
    stopping = true;
  }
  if (refresher.joinable()) refresher.join();
}

}  // namespace fuserank::remote
