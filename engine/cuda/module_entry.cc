// The two symbols the server resolves in libfuserank_cuda.so (see engine/cuda_module_abi.h).
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_probe.h"
#include "engine/cuda_module_abi.h"

namespace {

using fuserank::engine::cuda_module::AbiCheck;

absl::Status CheckAbi(const AbiCheck* abi) {
  if (abi == nullptr || !(*abi == AbiCheck())) {
    return absl::FailedPreconditionError(
        "libfuserank_cuda.so was built from other sources than this server (ABI mismatch)");
  }
  return absl::OkStatus();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void fuserank_cuda_probe(
    const AbiCheck* abi, int gpu, absl::Status* status, std::string* description) {
  *status = CheckAbi(abi);
  if (!status->ok()) return;
  absl::StatusOr<std::string> probed = fuserank::engine::cuda::ProbeCudaDevice(gpu);
  if (!probed.ok()) {
    *status = probed.status();
    return;
  }
  *description = *std::move(probed);
}

extern "C" __attribute__((visibility("default"))) void fuserank_create_cuda_backend(
    const AbiCheck* abi, const std::shared_ptr<const fuserank::engine::Model>* model,
    const fuserank::engine::BackendOptions* options,
    std::unique_ptr<fuserank::engine::Backend>* backend, absl::Status* status) {
  *status = CheckAbi(abi);
  if (!status->ok()) return;
  fuserank::engine::cuda::CudaOptions cuda_options;
  const char* reorder = std::getenv("FUSERANK_CUDA_REORDER_IDS");
  cuda_options.reorder_ids = reorder != nullptr && std::strcmp(reorder, "1") == 0;
  auto created = fuserank::engine::cuda::CudaBackend::Create(*model, *options, cuda_options);
  if (!created.ok()) {
    *status = created.status();
    return;
  }
  *backend = *std::move(created);
}
