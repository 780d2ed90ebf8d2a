#include "engine/remote/cluster_state.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <charconv>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace fuserank::remote {
namespace {

constexpr absl::Duration kMinRefreshGap = absl::Milliseconds(100);

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};

// Reads one CLUSTER SLOTS reply into `map`; `host` stands in for an empty node address
// (the node that answered).
absl::Status ParseSlots(const redisReply& reply, const std::string& host,
                        ClusterClient::State* state, SlotMap* map) {
  if (reply.type != REDIS_REPLY_ARRAY) return absl::InternalError("CLUSTER SLOTS: not an array");
  for (size_t i = 0; i < reply.elements; ++i) {
    const redisReply& range = *reply.element[i];
    if (range.type != REDIS_REPLY_ARRAY || range.elements < 3 ||
        range.element[0]->type != REDIS_REPLY_INTEGER ||
        range.element[1]->type != REDIS_REPLY_INTEGER ||
        range.element[2]->type != REDIS_REPLY_ARRAY || range.element[2]->elements < 2 ||
        range.element[2]->element[0]->type != REDIS_REPLY_STRING ||
        range.element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
      return absl::InternalError("CLUSTER SLOTS: malformed slot range");
    }
    const long long first = range.element[0]->integer;
    const long long last = range.element[1]->integer;
    if (first < 0 || last >= kClusterSlots || first > last) {
      return absl::InternalError("CLUSTER SLOTS: slot range out of bounds");
    }
    const redisReply& master = *range.element[2];
    std::string node_host(master.element[0]->str, master.element[0]->len);
    if (node_host.empty() || node_host == "?") node_host = host;
    Node* node = state->NodeFor(node_host, static_cast<int>(master.element[1]->integer));
    for (long long s = first; s <= last; ++s) map->owner[s] = node;
  }
  return absl::OkStatus();
}

timeval ToTimeval(std::chrono::milliseconds ms) {
  return {static_cast<time_t>(ms.count() / 1000),
          static_cast<suseconds_t>(ms.count() % 1000 * 1000)};
}

}  // namespace

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

Node::~Node() {
  absl::MutexLock lock(&mu_);
  for (redisContext* c : idle_) redisFree(c);
}

redisContext* Node::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      redisContext* c = idle_.back();
      idle_.pop_back();
      return c;
    }
  }
  return redisConnectNonBlock(host_.c_str(), port_);
}

void Node::Release(redisContext* context, bool clean, int pool_size) {
  if (context == nullptr) return;
  if (clean && context->err == 0) {
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(idle_.size()) < pool_size) {
      idle_.push_back(context);
      return;
    }
  }
  redisFree(context);
}

Node* ClusterClient::State::NodeFor(const std::string& host, int port) {
  absl::MutexLock lock(&mu);
  for (const auto& node : nodes) {
    if (node->port() == port && node->host() == host) return node.get();
  }
  nodes.push_back(std::make_unique<Node>(host, port));
  return nodes.back().get();
}

std::shared_ptr<const SlotMap> ClusterClient::State::Map() const {
  absl::MutexLock lock(&mu);
  return map;
}

void ClusterClient::State::SetSlot(int slot, Node* node) {
  absl::MutexLock lock(&mu);
  auto updated = map == nullptr ? std::make_shared<SlotMap>() : std::make_shared<SlotMap>(*map);
  updated->owner[slot] = node;
  map = std::move(updated);
}

void ClusterClient::State::RequestRefresh() {
  absl::MutexLock lock(&mu);
  refresh_wanted = true;
}

absl::Status ClusterClient::State::Refresh() {
  std::vector<std::pair<std::string, int>> candidates;
  {
    absl::MutexLock lock(&mu);
    for (const auto& node : nodes) candidates.emplace_back(node->host(), node->port());
  }
  for (const std::string& seed : options.seeds) {
    std::string host;
    int port = 0;
    if (ParseAddress(seed, &host, &port)) candidates.emplace_back(host, port);
  }
  std::vector<std::string> failures;
  const timeval tv = ToTimeval(options.connect_timeout);
  for (const auto& [host, port] : candidates) {
    std::unique_ptr<redisContext, ContextFree> c(redisConnectWithTimeout(host.c_str(), port, tv));
    if (c == nullptr || c->err != 0) {
      failures.push_back(absl::StrCat(host, ":", port, ": ", c ? c->errstr : "out of memory"));
      continue;
    }
    redisSetTimeout(c.get(), tv);
    std::unique_ptr<redisReply, ReplyFree> reply(
        static_cast<redisReply*>(redisCommand(c.get(), "CLUSTER SLOTS")));
    if (reply == nullptr) {
      failures.push_back(absl::StrCat(host, ":", port, ": ", c->errstr));
      continue;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      failures.push_back(
          absl::StrCat(host, ":", port, ": ", absl::string_view(reply->str, reply->len)));
      continue;
    }
    auto next = std::make_shared<SlotMap>();
    if (absl::Status parsed = ParseSlots(*reply, host, this, next.get()); !parsed.ok()) {
      failures.push_back(absl::StrCat(host, ":", port, ": ", parsed.message()));
      continue;
    }
    absl::MutexLock lock(&mu);
    map = std::move(next);
    return absl::OkStatus();
  }
  if (candidates.empty()) return absl::InvalidArgumentError("no seed node given");
  return absl::UnavailableError(
      absl::StrCat("no node answered CLUSTER SLOTS (", absl::StrJoin(failures, "; "), ")"));
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
