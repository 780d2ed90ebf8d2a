// Dot interaction: a warp per candidate stages its n vectors in shared memory (rows
// padded by one float against bank conflicts; each lane's loads kStage at a time) and
// each lane computes every 32nd pair.
// Concat: a warp per candidate copies its request's user vectors into h.
#include <cstdint>

#include "kernels/batch_layout.h"
#include "kernels/interaction.h"
#include "kernels/launch_error.h"
#include "kernels/layout_math.h"
#include "kernels/saturate.h"

namespace fuserank::kernels {
namespace {

constexpr int kMaxWarpsPerBlock = 4;
constexpr int kStage = 8;  // elements a lane loads before it stores them (dot staging)
constexpr size_t kDefaultSharedPerBlock = 48 * 1024;
constexpr uint32_t kMaxBlocks = 1u << 20;

__global__ void DotInteractionKernel(const DotArgs a) {
  extern __shared__ float smem[];
  const PackedHeader* h = reinterpret_cast<const PackedHeader*>(a.d_batch);
  const uint32_t candidates = h->num_candidates;
  const uint32_t* candidate_begin = Section<uint32_t>(a.d_batch, h->candidate_begin);
  const int has_z = a.z_width > 0 ? 1 : 0;
  const int n = a.num_tables + has_z;
  const int pitch = a.dim + 1;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  float* v = smem + static_cast<size_t>(warp) * n * pitch;
  const uint32_t pairs = NumPairs(static_cast<uint32_t>(n));
  const uint32_t warps = gridDim.x * (blockDim.x / 32);
  for (uint32_t c = blockIdx.x * (blockDim.x / 32) + warp; c < candidates; c += warps) {
    const uint32_t r = RequestOfCandidate(candidate_begin, h->num_requests, c);
    float* hrow = a.d_h + static_cast<size_t>(c) * a.h_ld;
    // Staging: a lane's elements kStage at a time, every load of a round issued before the
    // first is stored, so the loads overlap instead of one global round trip per element
    // (a fixed ~15 us at any batch size when they ran one after another).
    const int elements = n * a.dim;
    const int z_elements = has_z * a.dim;  // z is vector 0: its element e is idx e
    for (int base = lane; base < elements; base += 32 * kStage) {
      float x[kStage];
      int at[kStage];  // where element u goes in v; -1 past the last element
#pragma unroll
      for (int u = 0; u < kStage; ++u) {
        const int idx = base + 32 * u;
        at[u] = -1;
        if (idx >= elements) continue;
        const int k = idx / a.dim;
        const int e = idx - k * a.dim;
        at[u] = k * pitch + e;
        if (k < has_z) {
          // z, the bottom MLP's output in h, saturated (as the CPU saturates it).
          x[u] = SaturateFinite(hrow[e]);
        } else {
          const DotSlot s = a.d_slots[k - has_z];
          x[u] = s.user ? a.d_user[static_cast<size_t>(r) * a.user_ld + s.col + e]
                        : a.d_item[static_cast<size_t>(c) * a.item_ld + s.col + e];
        }
      }
#pragma unroll
      for (int u = 0; u < kStage; ++u) {
        if (at[u] < 0) continue;
        v[at[u]] = x[u];
        const int idx = base + 32 * u;
        if (idx < z_elements) hrow[idx] = x[u];  // z saturated in place
      }
    }
    __syncwarp();
    if (lane < static_cast<int>(pairs)) {
      uint32_t i, j;
      PairFromIndex(static_cast<uint32_t>(lane), &i, &j);
      for (uint32_t p = lane; p < pairs; p += 32) {
        const float* vi = v + i * pitch;
        const float* vj = v + j * pitch;
        float sum = 0.0f;
        for (int e = 0; e < a.dim; ++e) sum = fmaf(vi[e], vj[e], sum);
        hrow[a.z_width + p] = SaturateFinite(sum);
        AdvancePair(32, &i, &j);
      }
    }
    __syncwarp();
  }
}

__global__ void ConcatUserKernel(const ConcatUserArgs a) {
  const PackedHeader* h = reinterpret_cast<const PackedHeader*>(a.d_batch);
  const uint32_t candidates = h->num_candidates;
  const uint32_t* candidate_begin = Section<uint32_t>(a.d_batch, h->candidate_begin);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const uint32_t warps = gridDim.x * (blockDim.x / 32);
  for (uint32_t c = (blockIdx.x * blockDim.x + threadIdx.x) / 32; c < candidates; c += warps) {
    const uint32_t r = RequestOfCandidate(candidate_begin, h->num_requests, c);
    const float* user = a.d_user + static_cast<size_t>(r) * a.user_ld;
    float* hrow = a.d_h + static_cast<size_t>(c) * a.h_ld;
    for (int s = 0; s < a.num_slots; ++s) {
      const ConcatSlot slot = a.d_slots[s];
      for (int e = lane; e < slot.dim; e += 32) hrow[slot.h_col + e] = user[slot.user_col + e];
    }
  }
}

uint32_t Blocks(uint64_t warps, int warps_per_block) {
  const uint64_t blocks = (warps + warps_per_block - 1) / warps_per_block;
  return static_cast<uint32_t>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace

size_t DotSharedBytesPerWarp(int num_vectors, int dim) {
  return sizeof(float) * static_cast<size_t>(num_vectors) * static_cast<size_t>(dim + 1);
}

cudaError_t AllowDotSharedBytes(size_t bytes) {
  if (bytes <= kDefaultSharedPerBlock) return cudaSuccess;
  return cudaFuncSetAttribute(DotInteractionKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

cudaError_t LaunchDotInteraction(const DotArgs& a, cudaStream_t stream) {
  const int n = a.num_tables + (a.z_width > 0 ? 1 : 0);
  if (a.max_candidates == 0 || n < 2) return cudaSuccess;
  if (a.d_batch == nullptr || a.d_h == nullptr || a.dim <= 0 ||
      (a.num_tables > 0 && a.d_slots == nullptr) || (a.z_width != 0 && a.z_width != a.dim)) {
    return cudaErrorInvalidValue;
  }
  const size_t per_warp = DotSharedBytesPerWarp(n, a.dim);
  if (per_warp > a.max_shared_bytes) return cudaErrorInvalidValue;
  // The default budget while it holds a warp's vectors (more blocks per SM), else the
  // opted-in one.
  const size_t budget =
      per_warp <= kDefaultSharedPerBlock ? kDefaultSharedPerBlock : a.max_shared_bytes;
  int warps = static_cast<int>(budget / per_warp);
  if (warps > kMaxWarpsPerBlock) warps = kMaxWarpsPerBlock;
  ClearStaleLaunchError();
  DotInteractionKernel<<<Blocks(a.max_candidates, warps), warps * 32, warps * per_warp, stream>>>(
      a);
  return cudaGetLastError();
}

cudaError_t LaunchConcatUser(const ConcatUserArgs& a, cudaStream_t stream) {
  if (a.max_candidates == 0 || a.num_slots == 0) return cudaSuccess;
  if (a.d_batch == nullptr || a.d_slots == nullptr || a.d_user == nullptr || a.d_h == nullptr) {
    return cudaErrorInvalidValue;
  }
  constexpr int kWarps = 8;
  ClearStaleLaunchError();
  ConcatUserKernel<<<Blocks(a.max_candidates, kWarps), kWarps * 32, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace fuserank::kernels
