// The admission and transport limits the ranking port runs with: the config's values, or,
// for keys left at 0 (or `engine.streams: auto`), values derived from the other keys and
// from the cores this process may run on (docs/serving.md, "Sizing"). Logged at start.
// Pure functions of their arguments; thread-safe.
#ifndef FUSERANK_SERVER_SERVING_LIMITS_H_
#define FUSERANK_SERVER_SERVING_LIMITS_H_

#include <cstdint>
#include <string>

#include "server/config.h"

namespace fuserank::server {

struct ServingLimits {
  int cores = 1;                       // CPUs in this process's affinity mask
  int streams = 1;                     // engine.streams: backend workers per model
  int max_inflight_requests = 1;       // server.max_inflight_requests
  int max_concurrent_streams = 1;      // server.max_concurrent_streams
  int64_t transport_memory_bytes = 0;  // server.transport_memory_bytes
};

// The CPUs this process may run on (taskset, cpusets), at least 1.
int AvailableCores();

// `config`'s limits with every derived one filled in for a machine of `cores` CPUs.
ServingLimits ResolveServingLimits(const Config& config, int cores);

// One line for the start log: each limit and whether it was derived.
std::string DescribeServingLimits(const Config& config, const ServingLimits& limits);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_SERVING_LIMITS_H_
