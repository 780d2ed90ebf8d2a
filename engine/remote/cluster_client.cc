#include "engine/remote/cluster_client.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "engine/remote/cluster_state.h"
#include "engine/remote/key_slot.h"
#include "engine/remote/resp_frame.h"

namespace fuserank::remote {
namespace {

using Clock = std::chrono::steady_clock;

// The commands of one Run() that go to one node in one round, as one pipeline.
struct Job {
  Node* node = nullptr;
  bool asking = false;       // ASK redirect: each command is preceded by ASKING
  std::vector<int> indices;  // into the Run()'s commands
  redisContext* context = nullptr;
  size_t replies = 0;  // raw replies read (ASKING's +OK included)
  bool written = false;
  bool failed = false;
  bool refused = false;  // the node sent a reply past the limits
  // A value of the wrong length being dropped (SkipBulk): its bytes still to come (CRLF
  // included) and the length it announced. Its reply counts once all are dropped.
  size_t skip = 0;
  size_t skipped_bytes = 0;
};

// Where a command goes in the next round: its slot's owner, or a redirect's node.
struct Target {
  Node* node = nullptr;
  bool asking = false;
};

// Empties a reused reply's value and gives its memory back.
void Release(std::string* value) {
  if (value->capacity() > std::string().capacity()) std::string().swap(*value);
  value->clear();
}

void Fail(Reply* reply, ErrorKind kind, RunStats* stats) {
  reply->state = Reply::State::kError;
  reply->error = kind;
  Release(&reply->value);
  ++stats->errors[static_cast<int>(kind)];
}

// What GET and SET replies may be: a value, +OK, an error, a nil.
RespLimits RunLimits(size_t max_value_bytes) {
  RespLimits limits;
  limits.max_bulk = max_value_bytes;
  return limits;
}

}  // namespace

std::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone:
      return "none";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kConnection:
      return "connection";
    case ErrorKind::kRedirect:
      return "redirect";
    case ErrorKind::kClusterDown:
      return "cluster_down";
    case ErrorKind::kServer:
      return "server";
    case ErrorKind::kValueSize:
      return "value_size";
  }
  return "unknown";
}

ClusterClient::ClusterClient(const ClusterOptions& options)
    : state_(std::make_unique<State>(options)) {}

ClusterClient::~ClusterClient() { state_->Stop(); }

absl::Status ClusterClient::Create(const ClusterOptions& options,
                                   std::unique_ptr<ClusterClient>* client) {
  // hiredis writes with write(2): a peer that closed must be an EPIPE, not a SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  client->reset(new ClusterClient(options));
  State* state = (*client)->state_.get();
  absl::Status status = state->Refresh();
  state->refresher = std::thread([state] { state->RefresherLoop(); });
  return status;
}

int ClusterClient::known_nodes() const {
  absl::MutexLock lock(&state_->mu);
  return static_cast<int>(state_->nodes.size());
}

bool ClusterClient::has_map() const { return state_->Map() != nullptr; }

absl::Status ClusterClient::RefreshMap() { return state_->Refresh(); }

namespace {

// Appends a job's commands to its connection's output buffer.
void AppendCommands(const absl::Span<const Command> commands, Job* job) {
  for (const int i : job->indices) {
    const Command& command = commands[i];
    if (job->asking) redisAppendCommand(job->context, "ASKING");
    if (command.set) {
      redisAppendCommand(job->context, "SET %b %b", command.key.data(), command.key.size(),
                         command.value.data(), command.value.size());
    } else {
      redisAppendCommand(job->context, "GET %b", command.key.data(), command.key.size());
    }
  }
}

size_t ExpectedReplies(const Job& job) { return job.indices.size() * (job.asking ? 2 : 1); }

// The command (index into the Run()'s) that a job's n-th raw reply answers.
int CommandOf(const Job& job, size_t n) { return job.indices[job.asking ? n / 2 : n]; }

}  // namespace

// One Run(): its replies, where each pending command goes next, and the tallies.
struct ClusterClient::RunContext {
  State* state;
  absl::Span<const Command> commands;
  std::vector<Reply>* replies;
  std::vector<Target> targets;
  std::vector<int> pending;  // commands for the next round (redirected)
  // Redirect targets, alive for the run (a map refresh may forget them meanwhile); the
  // map's nodes live as long as the run's snapshot of it.
  std::vector<std::shared_ptr<Node>> held;
  RunStats stats;
  size_t kept_bytes = 0;  // in Reply::value so far (ClusterOptions::max_run_value_bytes)

  // Command i's value of `announced` bytes, not the length its `out` wants.
  void WrongSize(int i, size_t announced) {
    Fail(&(*replies)[i], ErrorKind::kValueSize, &stats);
    (*replies)[i].announced_bytes = announced;
  }

  // A value for command i: into its `out`, or kept in its reply within the run's bound.
  void Value(int i, const redisReply& r) {
    Reply& reply = (*replies)[i];
    const absl::Span<std::byte> out = commands[i].out;
    if (!out.empty()) {
      if (r.len != out.size()) return WrongSize(i, r.len);  // SkipBulk let none through
      std::memcpy(out.data(), r.str, r.len);
      Release(&reply.value);
    } else {
      if (r.len > state->options.max_run_value_bytes - kept_bytes) {
        return Fail(&reply, ErrorKind::kServer, &stats);
      }
      kept_bytes += r.len;
      if (reply.value.capacity() > r.len) Release(&reply.value);  // a longer earlier value
      reply.value.assign(r.str, r.len);
    }
    reply.state = Reply::State::kValue;
  }

  // Files reply `r` to command i: a value, an absence, an error, or a redirect to follow.
  void Handle(int i, const redisReply& r) {
    Reply& reply = (*replies)[i];
    reply.error = ErrorKind::kNone;
    reply.announced_bytes = 0;
    switch (r.type) {
      case REDIS_REPLY_STRING:
        return Value(i, r);
      case REDIS_REPLY_NIL:
        reply.state = Reply::State::kAbsent;
        Release(&reply.value);
        return;
      case REDIS_REPLY_STATUS:  // SET's +OK; never a GET's value
        if (!commands[i].out.empty()) return Fail(&reply, ErrorKind::kServer, &stats);
        reply.state = Reply::State::kValue;
        Release(&reply.value);
        return;
      case REDIS_REPLY_ERROR:
        break;
      default:
        Fail(&reply, ErrorKind::kServer, &stats);
        return;
    }
    const std::string_view text(r.str, r.len);
    int slot = 0;
    std::string host;
    int port = 0;
    const bool moved = text.starts_with("MOVED ");
    const bool ask = text.starts_with("ASK ");
    const std::string& asked = targets[i].node->host();
    if ((moved || ask) && ParseRedirect(text, asked, &slot, &host, &port)) {
      std::shared_ptr<Node> node = host == "?" ? nullptr : state->NodeFor(host, port);
      if (node == nullptr) {  // an endpoint unknown to the node, or too many nodes
        Fail(&reply, ErrorKind::kRedirect, &stats);
        state->RequestRefresh();
        return;
      }
      targets[i] = {node.get(), ask};
      held.push_back(node);
      pending.push_back(i);
      if (moved) {  // the slot lives there now; the rest of the map may have moved too
        ++stats.moved;
        // The key is retried where the node says, whatever slot it names (as go-redis and
        // Lettuce follow a MOVED's address); but a slot other than the key's is no news
        // about the key's slot, and taken as the node's word it would re-route another
        // slot's keys: only the refresh may change that one.
        if (slot == KeySlot(commands[i].key)) state->SetSlot(slot, node);
        state->RequestRefresh();
      } else {
        ++stats.ask;
      }
    } else if (text.starts_with("TRYAGAIN")) {  // a slot mid-migration: again
      targets[i].asking = false;
      pending.push_back(i);
    } else if (text.starts_with("CLUSTERDOWN")) {
      Fail(&reply, ErrorKind::kClusterDown, &stats);
    } else {
      Fail(&reply, ErrorKind::kServer, &stats);
    }
  }

  // Groups `round` by target into one job per (node, asking).
  std::vector<Job> MakeJobs(const std::vector<int>& round) {
    std::vector<Job> jobs;
    for (const int i : round) {
      const Target target = targets[i];
      if (target.node == nullptr) {  // no map yet, or a slot no master serves
        Fail(&(*replies)[i], ErrorKind::kClusterDown, &stats);
        state->RequestRefresh();
        continue;
      }
      auto job = std::find_if(jobs.begin(), jobs.end(), [&](const Job& j) {
        return j.node == target.node && j.asking == target.asking;
      });
      if (job == jobs.end()) {
        jobs.push_back({});
        job = jobs.end() - 1;
        job->node = target.node;
        job->asking = target.asking;
      }
      job->indices.push_back(i);
    }
    return jobs;
  }

  // Reads what job's socket has: false when the connection broke or the node sent a
  // reply past the limits (job->refused).
  bool Read(Job* job) {
    if (redisBufferRead(job->context) != REDIS_OK) return false;
    const RespLimits limits = RunLimits(state->options.max_value_bytes);
    for (;;) {
      if (job->skip > 0) {
        switch (DropBulk(job->context, &job->skip)) {
          case NextState::kMore:
            return true;
          case NextState::kRefused:
            job->refused = true;
            return false;
          default:
            break;
        }
        WrongSize(CommandOf(*job, job->replies++), job->skipped_bytes);
      }
      if (job->replies == ExpectedReplies(*job)) return true;
      // A value of the wrong length goes by unbuffered (ASKING's +OK wants no length).
      const bool asking_reply = job->asking && job->replies % 2 == 0;
      const size_t wanted = asking_reply ? 0 : commands[CommandOf(*job, job->replies)].out.size();
      if (wanted > 0 && SkipBulk(job->context, limits, wanted, &job->skipped_bytes)) {
        job->skip = job->skipped_bytes + 2;
        continue;
      }
      redisReply* r = nullptr;
      std::string why;
      switch (NextReply(job->context, limits, &r, &why)) {
        case NextState::kMore:
          return true;
        case NextState::kRefused:
          job->refused = true;
          return false;
        case NextState::kBroken:
          return false;
        case NextState::kReply:
          break;
      }
      const size_t n = job->replies++;
      if (!job->asking || n % 2 == 1) Handle(CommandOf(*job, n), *r);
      freeReplyObject(r);
    }
  }

  // Drives every job's pipeline at once until all are answered or the deadline passes.
  void Pump(std::vector<Job>& jobs, Clock::time_point deadline) {
    std::vector<pollfd> fds;
    std::vector<Job*> active;
    for (;;) {
      fds.clear();
      active.clear();
      for (Job& job : jobs) {
        if (job.failed || job.replies == ExpectedReplies(job)) continue;
        active.push_back(&job);
        const short events = POLLIN | (job.written ? 0 : POLLOUT);
        fds.push_back({job.context->fd, events, 0});
      }
      if (active.empty()) return;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return;
      if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) {
        return;
      }
      for (size_t k = 0; k < active.size(); ++k) {
        Job& job = *active[k];
        const short events = fds[k].revents;
        if (!job.written && (events & (POLLOUT | POLLERR | POLLHUP)) != 0) {
          int done = 0;
          if (redisBufferWrite(job.context, &done) != REDIS_OK) {
            job.failed = true;
            continue;
          }
          job.written = done != 0;
        }
        if ((events & (POLLIN | POLLERR | POLLHUP)) != 0 && !Read(&job)) job.failed = true;
      }
    }
  }

  // After a round: what is unanswered failed (connection broke, or the deadline passed);
  // connections go back to their pools, or are closed when replies may still arrive.
  void Settle(std::vector<Job>& jobs) {
    for (Job& job : jobs) {
      const bool complete = !job.failed && job.replies == ExpectedReplies(job);
      if (!complete) {
        const ErrorKind kind = job.refused  ? ErrorKind::kServer
                               : job.failed ? ErrorKind::kConnection
                                            : ErrorKind::kTimeout;
        if (job.failed && !job.refused) state->RequestRefresh();
        const size_t answered = job.asking ? job.replies / 2 : job.replies;
        for (size_t n = answered; n < job.indices.size(); ++n) {
          Fail(&(*replies)[job.indices[n]], kind, &stats);
        }
      }
      job.node->Release(job.context, complete, state->options.pool_size);
    }
  }
};

RunStats ClusterClient::Run(absl::Span<const Command> commands, Clock::time_point deadline,
                            std::vector<Reply>* replies) {
  replies->resize(commands.size());
  RunContext run{state_.get(), commands, replies, std::vector<Target>(commands.size()), {}, {}, {}};
  const std::shared_ptr<const SlotMap> map = state_->Map();
  std::vector<int> round(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    round[i] = static_cast<int>(i);
    run.targets[i].node = map == nullptr ? nullptr : map->owner[KeySlot(commands[i].key)];
  }
  for (int attempt = 0; !round.empty(); ++attempt) {
    if (attempt > state_->options.max_redirects) {
      for (const int i : round) Fail(&(*replies)[i], ErrorKind::kRedirect, &run.stats);
      break;
    }
    if (Clock::now() >= deadline) {
      for (const int i : round) Fail(&(*replies)[i], ErrorKind::kTimeout, &run.stats);
      break;
    }
    std::vector<Job> jobs = run.MakeJobs(round);
    for (Job& job : jobs) {
      job.context = job.node->Acquire();
      ++run.stats.round_trips;
      if (job.context == nullptr || job.context->err != 0) {
        job.failed = true;
        continue;
      }
      AppendCommands(commands, &job);
    }
    run.Pump(jobs, deadline);
    run.Settle(jobs);
    round = std::move(run.pending);
    run.pending.clear();
  }
  return run.stats;
}

}  // namespace fuserank::remote
