#include "server/model_loader.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_simd.h"
#include "engine/status_macros.h"
#include "server/guarded_backend.h"
#include "server/model_files.h"
#include "server/model_warmup.h"
#include "server/serving_limits.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {

ModelLoaderOptions LoaderOptionsFrom(const Config& config) {
  const EngineConfig& engine = config.engine;
  ModelLoaderOptions options;
  options.device = engine.device;
  options.on_device_failure = engine.on_device_failure;
  options.backend.workers = engine.streams;
  options.backend.cpu_threads = engine.cpu_threads;
  options.backend.worker_nice = engine.worker_nice;
  options.backend.gpu = engine.gpu;
  options.backend.cuda_graphs = engine.cuda_graphs;
  options.backend.allow_tf32 = engine.allow_tf32;
  options.backend.cpu_precision = engine.cpu_precision;
  options.backend.cuda_blocking_wait = engine.cuda_wait == CudaWait::kBlock;
  // The batcher merges requests up to engine.max_batch_candidates but takes a larger one
  // alone, so a backend holds the larger of that and one request (server.max_candidates).
  options.backend.max_batch_candidates =
      std::max(engine.max_batch_candidates, config.server.max_candidates);
  options.backend.host_tables = config.cache.placement == CachePlacement::kHost;
  options.limits = DecodeLimits{config.server.max_candidates, config.server.max_ids_per_feature};
  options.batcher.queue_capacity = engine.queue_capacity;
  options.batcher.max_batch_candidates = engine.max_batch_candidates;
  options.batcher.max_batch_wait_us = engine.max_batch_wait_us;
  options.cache.capacity = config.cache.hot_rows_per_table;
  options.cache.frequency = config.cache.policy == CachePolicy::kFrequency;
  options.cache.rebuild_interval = absl::Seconds(config.cache.rebuild_interval_seconds);
  options.roots = std::make_shared<const ModelRoots>(ModelRoots::FromConfig(config));
  options.budget = std::make_shared<MemoryBudget>(
      static_cast<uint64_t>(std::max<int64_t>(0, config.model_memory_budget_bytes)));
  // engine.streams may be `auto`: the workers the cores can run (serving_limits.h).
  const ServingLimits limits = ResolveServingLimits(config, AvailableCores());
  options.backend.workers = limits.streams;
  options.limits.max_ids = config.engine.max_batch_ids;
  options.batcher.max_batch_ids = config.engine.max_batch_ids;
  options.batcher.max_queued_ids = config.engine.max_queued_ids;
  options.batcher.max_queue_delay_ms = config.engine.max_queue_delay_ms;
  options.batcher.worker_nice = config.engine.worker_nice;
  options.remote = config.remote;
  return options;
}

absl::StatusOr<std::unique_ptr<ServedModel>> ServeModel(const std::string& name,
                                                        std::shared_ptr<const engine::Model> model,
                                                        const ModelLoaderOptions& options,
                                                        const ServedModel* previous) {
  auto served = std::make_unique<ServedModel>();
  served->name = ServedName(name, model->spec());
  served->model = std::move(model);
  const engine::HotRowCache* previous_cache =
      previous == nullptr ? nullptr : previous->hot_rows.get();
  absl::StatusOr<std::unique_ptr<engine::HotRowCache>> cache =
      engine::HotRowCache::Create(served->name, served->model, options.cache, previous_cache);
  if (!cache.ok()) {
    return WithContext(cache.status(), absl::StrCat("model '", served->name, "': cache"));
  }
  served->hot_rows = std::move(*cache);
  if (served->model->spec().has_remote_tables()) {
    const std::string context = absl::StrCat("model '", served->name, "'");
    if (options.remote.seed_nodes.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          context, " has storage: redis tables: remote.seed_nodes must name the cluster"));
    }
    const absl::Status connected =
        engine::RemoteTier::Create(served->model, options.remote, &served->remote);
    if (!connected.ok()) {
      if (options.remote.on_remote_error == engine::OnRemoteError::kFail) {
        return WithContext(connected, context);
      }
      spdlog::warn(
          "{}: {}; serving its storage: redis tables as zeros until the cluster answers "
          "(remote.on_remote_error: zero)",
          context, std::string(connected.message()));
    }
  }
  if (served->remote != nullptr) served->hot_rows->manager()->SetRemoteRows(served->remote.get());
  engine::BackendOptions backend_options = options.backend;
  backend_options.remote = served->remote.get();
  backend_options.hot_rows = served->hot_rows->manager();
  backend_options.sample_accesses = served->hot_rows->samples_accesses();
  absl::StatusOr<std::unique_ptr<engine::Backend>> backend =
      options.create_backend != nullptr
          ? options.create_backend(served->model, options.device, backend_options)
          : engine::CreateBackend(served->model, options.device, backend_options);
  if (!backend.ok()) {
    return WithContext(backend.status(), absl::StrCat("model '", served->name, "': engine.device ",
                                                      DeviceChoiceName(options.device)));
  }
  served->backend = std::move(*backend);
  if (options.warm_up) {
    TouchTablePages(*served->model);
    const absl::Status warm =
        WarmUpBackend(served->model, served->backend.get(), options.backend.max_batch_candidates,
                      options.limits.max_candidates);
    if (!warm.ok()) {
      return WithContext(
          warm, absl::StrCat("model '", served->name, "' version '", served->version(), "'"));
    }
  }
  DeviceFailurePolicy policy;
  policy.on_failure = options.on_device_failure;
  policy.model = served->name;
  policy.metrics = options.metrics;
  policy.cpu_options = backend_options;
  policy.on_failed = options.on_device_failed;
  auto guard = std::make_unique<GuardedBackend>(std::move(served->backend), served->model,
                                                std::move(policy));
  served->guard = guard.get();
  served->backend = std::move(guard);
  served->decoder = std::make_unique<RequestDecoder>(served->model, options.limits, served->name);
  served->batcher = std::make_unique<engine::Batcher>(served->backend.get(), options.batcher);
  // The warm-up's lookups are not traffic (as the hot-row counts, StartServing).
  if (served->remote != nullptr) served->remote->ResetCounts();
  served->hot_rows->StartServing(previous_cache);
  return served;
}

namespace {

std::string VersionName(const std::string& name, const engine::ModelSpec& spec) {
  return absl::StrCat("model '", ServedName(name, spec), "' version '", spec.version, "'");
}

}  // namespace

absl::StatusOr<PreparedVersion> PrepareModelVersion(const std::string& name,
                                                    const std::string& spec_path,
                                                    const ModelLoaderOptions& options) {
  PreparedVersion prepared;
  prepared.spec_path = spec_path;
  if (options.roots != nullptr) {
    ASSIGN_OR_RETURN(prepared.spec_path, options.roots->Confine(spec_path, "model spec"));
  } else if (absl::StatusOr<std::string> resolved = ResolvePath(spec_path); resolved.ok()) {
    prepared.spec_path = *std::move(resolved);  // the file the watch reads (NamedWeightsPath)
  }
  ASSIGN_OR_RETURN(prepared.spec, engine::ParseModelSpecFile(prepared.spec_path));
  prepared.weights_as_named =
      WeightsAsNamed(prepared.spec.weights_path, prepared.spec_path, spec_path);
  if (options.roots != nullptr) {
    absl::StatusOr<std::string> weights =
        options.roots->Confine(prepared.spec.weights_path, "weights");
    if (!weights.ok()) return WithContext(weights.status(), prepared.spec_path);
    prepared.spec.weights_path = *weights;
  }
  ASSIGN_OR_RETURN(const engine::WeightsFileBytes weights,
                   engine::Model::CheckWeightsFile(prepared.spec));
  prepared.weights_bytes = weights.file;
  const engine::ServingShape shape{
      options.backend.workers,    options.backend.cpu_threads, options.backend.max_batch_candidates,
      options.cache.capacity,     options.cache.frequency,     options.remote.near_cache_rows,
      options.backend.host_tables};
  prepared.memory =
      engine::EstimateModelMemory(prepared.spec, prepared.weights_bytes, shape, weights.copied);
  if (options.budget != nullptr) {
    RETURN_IF_ERROR(options.budget->Check(prepared.memory.total(), VersionName(name, prepared.spec),
                                          prepared.memory.Breakdown()));
  }
  return prepared;
}

absl::StatusOr<LoadedFiles> LoadModelFiles(const std::string& name, const std::string& spec_path,
                                           const ModelLoaderOptions& options, ModelFiles* files) {
  if (files != nullptr) {
    files->spec_path = spec_path;
    files->spec = StampFile(spec_path);
  }
  LoadedFiles loaded;
  ASSIGN_OR_RETURN(loaded.prepared, PrepareModelVersion(name, spec_path, options));
  const PreparedVersion& prepared = loaded.prepared;
  if (files != nullptr) {
    files->weights_path = prepared.weights_as_named;
    files->weights = StampFile(files->weights_path);
  }
  if (options.budget != nullptr) {
    ASSIGN_OR_RETURN(loaded.memory, options.budget->Reserve(prepared.memory.total(),
                                                            VersionName(name, prepared.spec),
                                                            prepared.memory.Breakdown()));
  }
  engine::ModelLoadOptions load;
  load.max_bytes = prepared.memory.model();  // the file may not grow past what was checked
  ASSIGN_OR_RETURN(loaded.model, engine::Model::Load(prepared.spec, load));
  return loaded;
}

absl::StatusOr<std::unique_ptr<ServedModel>> LoadModelVersion(const std::string& name,
                                                              const std::string& spec_path,
                                                              const ModelLoaderOptions& options,
                                                              const ServedModel* previous) {
  const auto start = std::chrono::steady_clock::now();
  // Stamped before loading: a file replaced during the load then shows up as a change.
  ModelFiles files;
  ASSIGN_OR_RETURN(LoadedFiles loaded_files, LoadModelFiles(name, spec_path, options, &files));
  const PreparedVersion& prepared = loaded_files.prepared;
  const auto loaded = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<ServedModel> served,
                   ServeModel(name, std::move(loaded_files.model), options, previous));
  served->path = spec_path;
  served->files = std::move(files);
  served->memory = std::move(loaded_files.memory);
  const auto end = std::chrono::steady_clock::now();
  using Seconds = std::chrono::duration<double>;
  spdlog::info(
      "model '{}' version '{}' loaded from {} in {:.3f} s (weights {:.3f} s, backend and "
      "warm-up {:.3f} s): {} tables, device {}{}, {} workers, memory {}",
      served->name, served->version(), spec_path, Seconds(end - start).count(),
      Seconds(loaded - start).count(), Seconds(end - loaded).count(),
      served->model->spec().tables.size(), served->backend->device(),
      served->backend->device() == "cpu"
          ? absl::StrCat(
                " (isa ", engine::CpuIsaName(engine::GetCpuDispatch().isa),
                options.backend.cpu_precision == engine::CpuPrecision::kBf16 ? ", bf16" : "", ")")
          : "",
      served->backend->num_workers(), prepared.memory.ToString());
  return served;
}

}  // namespace fuserank::server
