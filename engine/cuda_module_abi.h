// The boundary between the server and the run-time loaded CUDA module
// (libfuserank_cuda.so): two extern "C" functions, resolved with dlsym by
// engine/backend_factory.cc. Both sides are built by the same compiler from the same
// headers, so C++ types cross it; the size checks below catch a stale module.
// No CUDA header here: the server includes this file.
#ifndef FUSERANK_ENGINE_CUDA_MODULE_ABI_H_
#define FUSERANK_ENGINE_CUDA_MODULE_ABI_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "engine/backend.h"
#include "engine/batch.h"
#include "engine/model.h"

namespace fuserank::engine::cuda_module {

// 2: BatchResult::graph_capture_failures; 3: health(); 4: WarmupBatches();
// 5: BackendOptions::host_tables; 6: StageTimes::timed; 7: FlushLookupCounts()
inline constexpr int kAbiVersion = 7;
inline constexpr char kModuleFileName[] = "libfuserank_cuda.so";
inline constexpr char kProbeSymbol[] = "fuserank_cuda_probe";
inline constexpr char kCreateSymbol[] = "fuserank_create_cuda_backend";

// Fingerprint of the types that cross the boundary.
struct AbiCheck {
  int version = kAbiVersion;
  size_t model_size = sizeof(Model);
  size_t batch_size = sizeof(Batch);
  size_t result_size = sizeof(BatchResult);
  size_t options_size = sizeof(BackendOptions);

  bool operator==(const AbiCheck& o) const {
    return version == o.version && model_size == o.model_size && batch_size == o.batch_size &&
           result_size == o.result_size && options_size == o.options_size;
  }
};

// Sets *status to OK when device `gpu` is usable, else FAILED_PRECONDITION saying why;
// *description to a one-line description of the device.
using ProbeFn = void (*)(const AbiCheck* abi, int gpu, absl::Status* status,
                         std::string* description);
// Creates the CUDA backend for `model` (or sets *status to why not).
using CreateFn = void (*)(const AbiCheck* abi, const std::shared_ptr<const Model>* model,
                          const BackendOptions* options, std::unique_ptr<Backend>* backend,
                          absl::Status* status);

}  // namespace fuserank::engine::cuda_module

#endif  // FUSERANK_ENGINE_CUDA_MODULE_ABI_H_
