// The feature interaction, written straight into the first top-layer input h:
// `dot` (z and the lower-triangle dot products of [z, e_1..e_T]) and, for `concat` and
// the folded `linear`, the copy of each request's pooled user vectors into its
// candidates' rows (the lookup kernel writes the item vectors there itself).
// Launchers compile with the host compiler; the caller owns every buffer.
#ifndef FUSERANK_KERNELS_INTERACTION_H_
#define FUSERANK_KERNELS_INTERACTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/descriptors.h"

namespace fuserank::kernels {

struct DotArgs {
  const unsigned char* d_batch = nullptr;  // packed batch (counts, candidate_begin)
  const DotSlot* d_slots = nullptr;        // num_tables entries, spec order
  int num_tables = 0;
  int dim = 0;                    // width d of every vector
  const float* d_user = nullptr;  // [requests, user_ld]
  int user_ld = 0;
  const float* d_item = nullptr;  // [candidates, item_ld]
  int item_ld = 0;
  // h = [z, dots]: z (dim wide, when z_width > 0) is already in columns [0, z_width)
  // and is read from there; the dots are written from column z_width on.
  float* d_h = nullptr;
  int h_ld = 0;
  int z_width = 0;              // 0 or dim
  uint32_t max_candidates = 0;  // grid bound (size bucket)
  // Dynamic shared memory one block may use: 48 KiB, or what AllowDotSharedBytes raised
  // the kernel's limit to on this device.
  size_t max_shared_bytes = 48 * 1024;
};

// Shared memory one warp needs for a DotArgs; the launcher refuses more than
// DotArgs::max_shared_bytes per block (check at model load with DotSharedBytesPerWarp).
size_t DotSharedBytesPerWarp(int num_vectors, int dim);

// Lets the dot kernel use `bytes` of dynamic shared memory per block on the current
// device, above the default 48 KiB (up to cudaDevAttrMaxSharedMemoryPerBlockOptin). Call
// once per device before launching or capturing with max_shared_bytes = bytes.
cudaError_t AllowDotSharedBytes(size_t bytes);

// max_candidates == 0 or num_tables + (z_width > 0) < 2 (no pairs): returns at once.
cudaError_t LaunchDotInteraction(const DotArgs& args, cudaStream_t stream);

struct ConcatUserArgs {
  const unsigned char* d_batch = nullptr;
  const ConcatSlot* d_slots = nullptr;  // one per user table
  int num_slots = 0;
  const float* d_user = nullptr;
  int user_ld = 0;
  float* d_h = nullptr;
  int h_ld = 0;
  uint32_t max_candidates = 0;
};

// max_candidates == 0 or num_slots == 0: returns at once.
cudaError_t LaunchConcatUser(const ConcatUserArgs& args, cudaStream_t stream);

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_INTERACTION_H_
