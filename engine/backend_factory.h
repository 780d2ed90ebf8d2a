// Picks and creates the Backend for a model: the CPU engine, or the CUDA backend from
// the run-time loaded module (libfuserank_cuda.so), following engine.device.
#ifndef FUSERANK_ENGINE_BACKEND_FACTORY_H_
#define FUSERANK_ENGINE_BACKEND_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model.h"

namespace fuserank::engine {

enum class DeviceChoice { kAuto, kCpu, kCuda };

// kAuto: CUDA when the module loads and a GPU is usable, else the CPU (logged).
// kCuda without a usable GPU: FAILED_PRECONDITION saying why.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::shared_ptr<const Model> model,
                                                       DeviceChoice device,
                                                       const BackendOptions& options);

// What CreateBackend(kCuda) checks before it builds anything (the module loads, GPU `gpu`
// is usable, the model has no storage: redis table), for --check-config: OK, or the
// error CreateBackend would give ("engine.device is cuda: ...").
absl::Status CheckCudaCanServe(const Model& model, int gpu);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_BACKEND_FACTORY_H_
