#include "server/serving_limits.h"

#include <sched.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace fuserank::server {
namespace {

// `engine.streams: auto` on the CPU never exceeds the old fixed default.
constexpr int kMaxAutoStreams = 4;
constexpr int64_t kMiB = int64_t{1} << 20;

int AutoStreams(const EngineConfig& engine, int cores) {
  if (!engine.streams_auto) return engine.streams;
  if (engine.device == engine::DeviceChoice::kCuda) return kMaxAutoStreams;
  return std::clamp(cores / std::max(1, engine.cpu_threads), 1, kMaxAutoStreams);
}

// What the server can usefully hold at once: per model, a full queue and as many again
// being computed or answered (a batch of small requests holds many), plus a full batch of
// the largest requests per worker; and a few calls per core being read.
int DerivedInflight(const Config& config, int streams, int cores) {
  const EngineConfig& engine = config.engine;
  const int per_batch =
      std::max(1, engine.max_batch_candidates / std::max(1, config.server.max_candidates));
  const int64_t per_model = 2 * int64_t{engine.queue_capacity} + int64_t{streams} * per_batch;
  const int64_t models = static_cast<int64_t>(config.models.size());
  return static_cast<int>(std::min<int64_t>(1 << 20, models * per_model + 4 * cores));
}

}  // namespace

int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

ServingLimits ResolveServingLimits(const Config& config, int cores) {
  const ServerConfig& server = config.server;
  ServingLimits limits;
  limits.cores = std::max(1, cores);
  limits.streams = AutoStreams(config.engine, limits.cores);
  limits.max_inflight_requests = server.max_inflight_requests > 0
                                     ? server.max_inflight_requests
                                     : DerivedInflight(config, limits.streams, limits.cores);
  // One connection may hold twice the in-flight bound: enough that admission, not the
  // transport, answers the excess (at once, RESOURCE_EXHAUSTED), never unbounded.
  limits.max_concurrent_streams =
      server.max_concurrent_streams > 0
          ? server.max_concurrent_streams
          : static_cast<int>(std::min<int64_t>(1 << 20, 2 * int64_t{limits.max_inflight_requests}));
  // Room for 32 requests of the largest size in the transport at once, and never below
  // 256 MiB.
  limits.transport_memory_bytes =
      server.transport_memory_bytes > 0
          ? server.transport_memory_bytes
          : std::max<int64_t>(256 * kMiB, 32 * server.max_request_bytes);
  return limits;
}

std::string DescribeServingLimits(const Config& config, const ServingLimits& limits) {
  auto origin = [](bool derived) { return derived ? " (derived)" : ""; };
  const ServerConfig& server = config.server;
  return absl::StrCat(limits.cores, " cores; engine.streams ", limits.streams,
                      origin(config.engine.streams_auto), ", server.max_inflight_requests ",
                      limits.max_inflight_requests, origin(server.max_inflight_requests == 0),
                      ", server.max_concurrent_streams ", limits.max_concurrent_streams,
                      origin(server.max_concurrent_streams == 0),
                      ", server.transport_memory_bytes ", limits.transport_memory_bytes,
                      origin(server.transport_memory_bytes == 0));
}

}  // namespace fuserank::server
