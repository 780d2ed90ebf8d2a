// Chooses the backend for engine.device. The CUDA backend lives in a module loaded with
// dlopen (never linked: cuBLASLt must stay out of the server binary); it is looked for
// at $FUSERANK_CUDA_MODULE, else <executable dir>/../lib/libfuserank_cuda.so. A loaded
// module stays loaded for the life of the process (its backends may outlive any caller).
#include "engine/backend_factory.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cuda_module_abi.h"
#include "engine/hot_rows/sampling_backend.h"
#include "spdlog/spdlog.h"

namespace fuserank::engine {
namespace {

namespace abi = cuda_module;

struct CudaModule {
  abi::ProbeFn probe = nullptr;
  abi::CreateFn create = nullptr;
};

std::string ModulePath() {
  if (const char* env = std::getenv("FUSERANK_CUDA_MODULE"); env != nullptr && *env != '\0') {
    return env;
  }
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return abi::kModuleFileName;  // the loader's search path
  const std::string path(exe, static_cast<size_t>(n));
  const std::string dir = path.substr(0, path.find_last_of('/'));
  return absl::StrCat(dir, "/../lib/", abi::kModuleFileName);
}

// Loads (once per path) the module and resolves its two entry points.
absl::StatusOr<CudaModule> LoadCudaModule() {
  static absl::Mutex mu(absl::kConstInit);
  static auto* loaded = new std::map<std::string, CudaModule>();
  const std::string path = ModulePath();
  absl::MutexLock lock(&mu);
  if (auto it = loaded->find(path); it != loaded->end()) return it->second;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::FailedPreconditionError(absl::StrCat("cannot load the CUDA backend module ", path,
                                                      ": ", err != nullptr ? err : "dlopen failed",
                                                      " (set FUSERANK_CUDA_MODULE to its path)"));
  }
  CudaModule module;
  module.probe = reinterpret_cast<abi::ProbeFn>(dlsym(handle, abi::kProbeSymbol));
  module.create = reinterpret_cast<abi::CreateFn>(dlsym(handle, abi::kCreateSymbol));
  if (module.probe == nullptr || module.create == nullptr) {
    dlclose(handle);
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA backend module ", path, " lacks its entry points"));
  }
  loaded->emplace(path, module);
  return module;
}

// The module loaded and GPU `gpu` probed: its description, or FAILED_PRECONDITION saying
// why the CUDA backend cannot run this model here.
absl::StatusOr<std::string> ProbeCuda(const Model& model, int gpu, CudaModule* module) {
  if (model.spec().has_remote_tables()) {  // auto falls back to the CPU on this
    return absl::FailedPreconditionError(
        "storage: redis tables are served by the CPU engine only (engine.device: cpu or auto)");
  }
#ifndef FUSERANK_WITH_CUDA_MODULE
  if (std::getenv("FUSERANK_CUDA_MODULE") == nullptr) {
    return absl::FailedPreconditionError(
        "this fuserank was built without the CUDA backend (FUSERANK_CUDA=OFF or no nvcc)");
  }
#endif
  absl::StatusOr<CudaModule> loaded = LoadCudaModule();
  if (!loaded.ok()) return loaded.status();
  *module = *loaded;
  const abi::AbiCheck check;
  absl::Status status;
  std::string description;
  module->probe(&check, gpu, &status, &description);
  if (!status.ok()) return status;
  return description;
}

// The CUDA backend, or FAILED_PRECONDITION when no module or no usable GPU; other codes
// for a GPU that cannot serve this model (unsupported dtype, out of memory).
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(std::shared_ptr<const Model> model,
                                                           const BackendOptions& options) {
  CudaModule module;
  absl::StatusOr<std::string> description = ProbeCuda(*model, options.gpu, &module);
  if (!description.ok()) return description.status();
  const abi::AbiCheck check;
  absl::Status status;
  std::unique_ptr<Backend> backend;
  module.create(&check, &model, &options, &backend, &status);
  if (!status.ok()) return status;
  spdlog::info("engine: CUDA backend on {} ({}), {} streams, graphs {}", backend->device(),
               *description, backend->num_workers(), options.cuda_graphs ? "on" : "off");
  // Its lookups run on the device: the frequency policy's samples are taken on the host.
  if (options.sample_accesses && options.hot_rows != nullptr &&
      options.hot_rows->options().sketches) {
    backend = std::make_unique<SamplingBackend>(std::move(backend), options.hot_rows);
  }
  return backend;
}

}  // namespace

absl::Status CheckCudaCanServe(const Model& model, int gpu) {
  CudaModule module;
  absl::StatusOr<std::string> description = ProbeCuda(model, gpu, &module);
  if (!description.ok()) {
    return absl::Status(description.status().code(),
                        absl::StrCat("engine.device is cuda: ", description.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::shared_ptr<const Model> model,
                                                       DeviceChoice device,
                                                       const BackendOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("CreateBackend: no model");
  switch (device) {
    case DeviceChoice::kCpu:
      return CreateCpuBackend(std::move(model), options);
    case DeviceChoice::kCuda: {
      absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(model, options);
      if (!backend.ok()) {
        return absl::Status(backend.status().code(),
                            absl::StrCat("engine.device is cuda: ", backend.status().message()));
      }
      return backend;
    }
    case DeviceChoice::kAuto: {
      absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(model, options);
      if (backend.ok()) {
        if (options.cpu_precision == CpuPrecision::kBf16) {
          // Accepted at start because auto may pick the CPU; here it picked the GPU.
          spdlog::warn(
              "engine.device is auto and picked the GPU: engine.cpu_precision bf16 applies "
              "to the CPU engine only and is not used (set engine.device: cpu to use it, or "
              "cpu_precision: fp32)");
        }
        return backend;
      }
      spdlog::info("engine.device is auto: using the CPU ({})",
                   std::string(backend.status().message()));
      return CreateCpuBackend(std::move(model), options);
    }
  }
  return absl::InvalidArgumentError("CreateBackend: unknown device choice");
}

}  // namespace fuserank::engine
