// One MLP (the bottom or the top stack) on cuBLASLt: per layer a matmul descriptor with
// the bias (+ReLU) epilogue, and per (layer, size bucket) the matrix layouts and the
// algorithm, chosen once at build time from cublasLtMatmulAlgoGetHeuristic's proposals (up
// to 8, best first): each whose state is success is run once (which also loads its
// kernels); with autotune, every one that ran is then timed on the device and the fastest
// kept, where it beats the heuristic's first that ran by more than a tenth (so timing
// noise does not flip the choice); without, that first one is kept. Built once per model;
// then read-only and shared by every worker (each passes its own handle, buffers,
// workspace).
#ifndef FUSERANK_ENGINE_CUDA_MLP_PLAN_H_
#define FUSERANK_ENGINE_CUDA_MLP_PLAN_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cuda/cuda_handles.h"

namespace fuserank::engine::cuda {

// A layer as cuBLASLt runs it: out[N, out] = act(in[N, in] * W^T + b), activations
// row-major with row pitches in_ld / out_ld (floats). W stays in PyTorch's [out, in]
// row-major layout on the device, its rows w_ld floats apart (PaddedLd(in): every row
// 16-byte aligned, so cuBLASLt may pick its vectorised kernels; the pad is zeros):
// cuBLASLt reads it as the column-major [in, out] matrix with TRANSA = T, so no transpose
// ever runs.
struct MlpLayerShape {
  int in = 0;
  int out = 0;
  bool relu = true;
  const float* d_weight = nullptr;
  const float* d_bias = nullptr;
  int w_ld = 0;  // W's row pitch in floats, >= in
  int in_ld = 0;
  int out_ld = 0;
};

// Per layer, the activations one worker passes: d_in [N, in_ld], d_out [N, out_ld].
struct LayerIo {
  const float* d_in = nullptr;
  float* d_out = nullptr;
};

// Sets the row pitches of a stack: layer 0 reads rows of first_in_ld floats, the last
// layer writes rows of last_out_ld, and activations in between use hidden_ld.
inline void SetPitches(std::vector<MlpLayerShape>* layers, int first_in_ld, int hidden_ld,
                       int last_out_ld) {
  for (size_t l = 0; l < layers->size(); ++l) {
    (*layers)[l].in_ld = l == 0 ? first_in_ld : hidden_ld;
    (*layers)[l].out_ld = l + 1 == layers->size() ? last_out_ld : hidden_ld;
  }
}

// The activations of a stack of `layers` layers that reads `in`, ping-pongs between
// two hidden buffers and writes `out` (pitches as in SetPitches).
inline std::vector<LayerIo> ChainIo(size_t layers, const float* in, float* hidden0, float* hidden1,
                                    float* out) {
  std::vector<LayerIo> io(layers);
  const float* src = in;
  for (size_t l = 0; l < layers; ++l) {
    float* dst = l + 1 == layers ? out : (l % 2 == 0 ? hidden0 : hidden1);
    io[l] = {src, dst};
    src = dst;
  }
  return io;
}

// How one (layer, size bucket)'s algorithm was chosen.
struct AlgoChoice {
  int index = 0;  // among the heuristic's proposals (0: its first)
  int ran = 0;    // proposals that ran
  // Autotune, when more than one ran: device microseconds per matmul of the heuristic's
  // first that ran and of the one kept (0 otherwise).
  double first_us = 0;
  double chosen_us = 0;
  // cuBLASLt's account of the kept algorithm (CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS:
  // tensor-core or FMA, input type); 0 when the library did not report it.
  uint64_t numerical_flags = 0;

  // The kept algorithm multiplies on tensor cores with TF32 inputs (allow_tf32 in use).
  bool ComputesInTf32() const {
    return (numerical_flags & CUBLASLT_NUMERICAL_IMPL_FLAGS_TENSOR_OP_MASK) != 0 &&
           (numerical_flags & CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_TF32) != 0;
  }
};

class MlpPlan {
 public:
  // `buckets`: the batch sizes (rows N) the plan serves, ascending.
  // allow_tf32: CUBLAS_COMPUTE_32F_FAST_TF32 instead of CUBLAS_COMPUTE_32F.
  // autotune: time the proposals that run and keep the fastest (above).
  static absl::StatusOr<std::unique_ptr<MlpPlan>> Create(cublasLtHandle_t handle,
                                                         std::vector<MlpLayerShape> layers,
                                                         std::vector<uint32_t> buckets,
                                                         bool allow_tf32, size_t workspace_bytes,
                                                         bool autotune);

  // Enqueues every layer for `bucket_index` rows; io has one entry per layer.
  // Returns the number of cuBLASLt calls made in *launches.
  absl::Status Enqueue(cublasLtHandle_t handle, int bucket_index, absl::Span<const LayerIo> io,
                       void* d_workspace, size_t workspace_bytes, cudaStream_t stream,
                       int* launches) const;

  size_t num_layers() const { return layers_.size(); }
  const std::vector<uint32_t>& buckets() const { return buckets_; }
  const MlpLayerShape& shape(size_t layer) const { return layers_[layer].shape; }
  const AlgoChoice& choice(size_t layer, size_t bucket_index) const {
    return layers_[layer].choice[bucket_index];
  }

 private:
  struct Layer {
    MlpLayerShape shape;
    LtMatmulDesc desc;
    LtLayout a;
    std::vector<LtLayout> b;  // per bucket
    std::vector<LtLayout> d;  // per bucket
    std::vector<cublasLtMatmulAlgo_t> algo;
    std::vector<AlgoChoice> choice;  // per bucket
  };
  MlpPlan() = default;

  std::vector<Layer> layers_;
  std::vector<uint32_t> buckets_;
};

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_MLP_PLAN_H_
