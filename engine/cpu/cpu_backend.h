// The CPU engine: scores a Batch on the host. It is the product's engine on machines
// without a GPU and the reference every GPU kernel is tested against.
// Thread-safe in the Backend sense: one Run() per worker index at a time.
#ifndef FUSERANK_ENGINE_CPU_CPU_BACKEND_H_
#define FUSERANK_ENGINE_CPU_CPU_BACKEND_H_

#include <memory>

#include "engine/backend.h"
#include "engine/model.h"

namespace fuserank::engine {

std::unique_ptr<Backend> CreateCpuBackend(std::shared_ptr<const Model> model,
                                          const BackendOptions& options);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_BACKEND_H_
