// A real device fault on the GPU, after the backend has started: a lookup launched with a
// table list at an invalid address (a kernel bug's kind of fault) leaves the context
// unusable (cudaErrorIllegalAddress). The CUDA backend must see it at its next batch,
// answer UNAVAILABLE naming the device and the error, say the same in health(), and answer
// every later batch so at once, while the CPU engine still scores the batch from the same
// Model (what engine.on_device_failure: cpu switches to; the server's reaction is tested
// on the CPU in guarded_backend_test.cc). The fault kills the process's context, so it
// runs in a child process (a death test that re-runs this binary): nothing after it in
// this process is touched.
#include "engine/device_fault.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/cuda_backend.h"
#include "gtest/gtest.h"
#include "kernels/batch_layout.h"
#include "kernels/lookup.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/pipeline_util.h"

namespace fuserank::engine::cuda {
namespace {

// Exits the child with `code` after saying why (a death test sees only the exit code and
// stderr).
[[noreturn]] void Exit(int code, const std::string& why) {
  std::fprintf(stderr, "%s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

// Launches the lookup on its own stream with a header of one item bag and the table list
// at address 0x10, and waits: the error it returns.
cudaError_t InjectFault() {
  kernels::PackedHeader h;
  h.num_requests = 1;
  h.num_candidates = 1;
  h.num_item_bags = 1;
  void* d_batch = nullptr;
  if (cudaMalloc(&d_batch, 4096) != cudaSuccess) return cudaErrorMemoryAllocation;
  cudaMemset(d_batch, 0, 4096);
  cudaMemcpy(d_batch, &h, sizeof(h), cudaMemcpyHostToDevice);
  void* d_out = nullptr;
  cudaMalloc(&d_out, 4096);
  kernels::LookupArgs a;
  a.d_batch = static_cast<const unsigned char*>(d_batch);
  a.d_tables = reinterpret_cast<const kernels::LookupTable*>(uintptr_t{0x10});
  a.item_tables = 1;
  a.d_item_out = static_cast<float*>(d_out);
  a.item_ld = 32;
  a.max_candidates = 1;
  a.max_requests = 1;
  a.lanes = 4;
  a.prefetch_ids = false;
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const cudaError_t launched = kernels::LaunchPooledLookup(a, stream);
  if (launched != cudaSuccess) return launched;
  return cudaStreamSynchronize(stream);
}

// The child: a backend that scored a batch, the fault, then the checks. Exit code 0 and
// "fault handled" on stderr when every check held.
void FaultAfterStart() {
  const TestSetup s = MakeModel({Interaction::kDot, DType::kF32, 16, true}, 5);
  if (s.model == nullptr) Exit(2, "model");
  BackendOptions options;
  options.workers = 2;
  auto gpu = CudaBackend::Create(s.model, options, CudaOptions{});
  if (!gpu.ok()) Exit(3, gpu.status().ToString());
  std::mt19937_64 rng(5);
  const std::vector<test::RefRequest> requests = MakeRequests(s.model->spec(), {40, 3}, rng);
  const Batch batch = test::MakeBatch(s.model, requests);
  BatchResult before;
  if (absl::Status st = (*gpu)->Run(0, batch, &before); !st.ok()) Exit(4, st.ToString());

  const cudaError_t fault = InjectFault();
  if (!IsContextFatalCudaError(static_cast<int>(fault))) {
    Exit(5, std::string("the injected fault returned ") + cudaGetErrorName(fault));
  }
  const std::string name = cudaGetErrorName(fault);  // cudaErrorIllegalAddress, as a rule

  for (int worker : {0, 1, 0}) {
    BatchResult after;
    const absl::Status st = (*gpu)->Run(worker, batch, &after);
    if (st.code() != absl::StatusCode::kUnavailable) {
      Exit(6, "a batch after the fault: " + st.ToString());
    }
    if (st.message().find("cuda:0") == std::string::npos ||
        st.message().find(name) == std::string::npos) {
      Exit(7, "the batch's error names neither the device nor the fault: " + st.ToString());
    }
  }
  const absl::Status health = (*gpu)->health();
  if (health.code() != absl::StatusCode::kUnavailable ||
      health.message().find(name) == std::string::npos) {
    Exit(8, "health after the fault: " + health.ToString());
  }
  // What engine.on_device_failure: cpu serves from then on: the same batch from the
  // same Model on the CPU engine, scored as the GPU scored it before the fault.
  std::unique_ptr<Backend> cpu = CreateCpuBackend(s.model, options);
  BatchResult on_cpu;
  if (absl::Status st = cpu->Run(0, batch, &on_cpu); !st.ok()) Exit(9, st.ToString());
  if (on_cpu.result_begin != before.result_begin || on_cpu.items.size() != before.items.size()) {
    Exit(10, "the CPU engine's result has another shape");
  }
  for (size_t i = 0; i < on_cpu.items.size(); ++i) {
    if (std::abs(on_cpu.items[i].score - before.items[i].score) > 1e-5f) {
      Exit(11, "score " + std::to_string(i) + " differs from the GPU's before the fault");
    }
  }
  std::fprintf(stderr, "%s\nfault handled\n", health.ToString().c_str());
  std::fflush(stderr);
  std::_Exit(0);
}

TEST(CudaDeviceFaultDeathTest, AFaultAfterStartFailsTheBackendForGoodNamingTheError) {
  FUSERANK_SKIP_WITHOUT_GPU();
  // The child re-runs this binary for this test alone: no CUDA state crosses a fork.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(FaultAfterStart(), ::testing::ExitedWithCode(0), "fault handled");
}

}  // namespace
}  // namespace fuserank::engine::cuda
