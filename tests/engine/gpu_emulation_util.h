// The CUDA backend's data path emulated on the host, for the tests that check it without a
// GPU: the device rows of every table, the id-reorder gather, and a batch computed from the
// packed batch and the GpuLayout alone, the way the kernels address memory and with their
// float arithmetic (not their thread mapping); plus the comparison of its pooled blocks
// with the CPU engine's. Test helpers; not thread-safe.
#ifndef FUSERANK_TESTS_ENGINE_GPU_EMULATION_UTIL_H_
#define FUSERANK_TESTS_ENGINE_GPU_EMULATION_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/batch.h"
#include "engine/cuda/gpu_layout.h"
#include "engine/model.h"
#include "kernels/batch_layout.h"
#include "tests/engine/cpu/cpu_reference_util.h"

namespace fuserank::engine::cuda::emulation {

using Fixture = test::BatchFixture;

// What DeviceModel::Upload copies for lookup table k: the device rows of every table.
std::vector<std::vector<std::byte>> DeviceTables(const Model& m, const GpuLayout& g);

// The gather pass: unique row s of the packed list copied to slot s (stride bytes apart).
std::vector<std::byte> Gather(const std::vector<std::vector<std::byte>>& tables, const GpuLayout& g,
                              const unsigned char* base, const kernels::PackedHeader& h);

// The emulated device buffers after a batch: the pooled user block, the pooled item block
// (dot) or h (concat, linear: item vectors are pooled into it), and every score.
struct Emulated {
  std::vector<float> user;
  std::vector<float> item;
  std::vector<float> h;
  std::vector<float> scores;
};

// Computed the way the kernels address memory: bags and dense rows from the packed
// sections, rows from the device tables (or, `gathered` set, from the gathered slots the
// packed rows name), pooled vectors at GpuLayout columns, h built by the slot lists, the
// MLP with the layout's pitches. Pools as the kernel does: fmaf(w, x, acc) in id order,
// the weights summed in float.
Emulated EmulateGpu(const Model& m, const GpuLayout& g, const std::vector<unsigned char>& buf,
                    const std::vector<std::vector<std::byte>>& tables,
                    const std::vector<std::byte>* gathered);

// Compares the emulated pooled blocks, table by table, with the CPU engine's PooledLookup
// into the same layout (tolerances in the definition).
void ExpectPooledLikeTheCpuEngine(const Model& m, const GpuLayout& g, const Batch& batch,
                                  const Emulated& em);

// The model, requests and batch of a case: MakeBatchFixture's; for int8, a model whose
// tables are codes with a drawn (scale, bias) per row (the test model holds the dequantized
// values, which the reference then uses).
Fixture MakeCaseFixture(const ModelSpec& spec, uint64_t seed, const std::vector<int>& sizes);

}  // namespace fuserank::engine::cuda::emulation

#endif  // FUSERANK_TESTS_ENGINE_GPU_EMULATION_UTIL_H_
