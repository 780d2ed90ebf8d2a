// The default of every numeric, boolean and string key of the server config (SPEC section
// 5), written once: the config structs (server/config.h) and the option structs that carry
// a key's value into the engine and the services (BackendOptions, BatcherOptions,
// DecodeLimits, RankerOptions, HotRowCacheOptions, ...) initialise their members from
// these. Here, in the engine layer, because both the engine and the server include it.
// The keys themselves (path, range, doc) are declared in server/config_keys.cc.
#ifndef FUSERANK_ENGINE_CONFIG_DEFAULTS_H_
#define FUSERANK_ENGINE_CONFIG_DEFAULTS_H_

#include <cstdint>

namespace fuserank::defaults {

// server.*
inline constexpr char kListen[] = "0.0.0.0:8700";
inline constexpr char kAdminListen[] = "127.0.0.1:8701";
inline constexpr bool kAdminAllowPlaintextToken = true;
inline constexpr char kMetricsListen[] = "0.0.0.0:8702";
inline constexpr int64_t kMaxRequestBytes = 16777216;
inline constexpr int kMaxCandidates = 4096;
inline constexpr int kMaxIdsPerFeature = 1024;
inline constexpr int kShutdownGraceSeconds = 10;
inline constexpr int kMaxInflightRequests = 0;  // 0: derived at start
inline constexpr int kMaxConcurrentStreams = 0;
inline constexpr int kReplyTimeoutSeconds = 10;
inline constexpr int64_t kTransportMemoryBytes = 0;

// engine.*
inline constexpr int kGpu = 0;
inline constexpr int kStreams = 4;  // the workers of a backend built without a config
inline constexpr int kMaxBatchCandidates = 8192;
inline constexpr int kMaxBatchWaitUs = 200;
inline constexpr int kQueueCapacity = 1024;
inline constexpr int kMaxQueueDelayMs = 0;
inline constexpr int kMaxBatchIds = 4194304;
inline constexpr int64_t kMaxQueuedIds = 16777216;
inline constexpr bool kCudaGraphs = true;
inline constexpr int kCpuThreads = 1;
inline constexpr int kWorkerNice = 10;  // compute threads run this far below gRPC's
inline constexpr bool kAllowTf32 = false;
inline constexpr bool kCudaBlockingWait = true;

// cache.*
inline constexpr int kHotRowsPerTable = 4096;
inline constexpr int kRebuildIntervalSeconds = 60;
inline constexpr int kSharedMemoryRows = 0;

// model.*
inline constexpr char kModelPath[] = "config/models/demo.yaml";
inline constexpr int kModelWatchIntervalSeconds = 5;
inline constexpr int64_t kModelMemoryBudgetBytes = 0;

// logging.*
inline constexpr char kLogLevel[] = "info";
inline constexpr double kAccessLogSample = 0.0;

}  // namespace fuserank::defaults

#endif  // FUSERANK_ENGINE_CONFIG_DEFAULTS_H_
