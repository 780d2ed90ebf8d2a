// The reduced-precision matrix product of the CPU engine's opt-in bf16 MLP
// (engine.cpu_precision: bf16): C = A * B + bias (optionally ReLU) with A rounded to bf16
// as it is read, B held in bf16, products summed in fp32 by AVX512_BF16 dot instructions
// (two multiply-adds per fp32 lane and instruction, twice the fp32 FMA rate). B is packed
// once at model load into 16-column panels of k/2 bf16 pairs. Immutable after packing,
// shared by any number of threads; SgemmBf16 keeps no state but a per-thread buffer of
// the bf16 rows of A (12 rows x k).
#ifndef FUSERANK_ENGINE_CPU_SGEMM_BF16_H_
#define FUSERANK_ENGINE_CPU_SGEMM_BF16_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/status/status.h"
#include "engine/cpu/sgemm.h"

namespace fuserank::engine {

// OK when this process can run SgemmBf16: the CPU has AVX-512 and AVX512_BF16 and
// FUSERANK_CPU_ISA does not hold the engine below AVX-512; else FAILED_PRECONDITION saying
// which is missing.
absl::Status Bf16KernelsAvailable();

// fp32 -> bf16, rounded to nearest even; values beyond bf16's largest finite value
// become it (no infinity from a finite input); NaN stays NaN.
uint16_t RoundToBf16(float value);
// bf16 -> fp32 (exact).
float Bf16ToFloat(uint16_t value);

class PackedMatrixBf16 {
 public:
  PackedMatrixBf16() = default;
  // The bf16 copy of an fp32 packed matrix (same k, n and panels).
  static PackedMatrixBf16 FromPacked(const PackedMatrix& fp32);

  bool empty() const { return n_ == 0; }
  int k() const { return k_; }
  int n() const { return n_; }
  int pairs() const { return (k_ + 1) / 2; }  // k rounded up to pairs; a missing k row is 0
  int panels() const { return (n_ + kSgemmPanel - 1) / kSgemmPanel; }
  // Panel j: pairs() rows of 16 columns x (row 2p, row 2p + 1) bf16 values.
  const uint16_t* panel(int j) const {
    return data_.get() + static_cast<size_t>(j) * pairs() * 2 * kSgemmPanel;
  }

 private:
  struct Free {
    void operator()(uint16_t* p) const { std::free(p); }
  };
  int k_ = 0;
  int n_ = 0;
  std::unique_ptr<uint16_t[], Free> data_;
};

// The bf16 dot peak of this core, one thread: the best GFLOP/s (2 per multiply-add) of
// `rounds` runs of `iterations` x 12 independent 16-lane dot instructions. Where it is not
// above the fp32 FMA peak (MeasureFmaGflops), bf16 cannot make the MLP faster.
// REQUIRES: Bf16KernelsAvailable().ok().
double MeasureBf16DotGflops(int64_t iterations, int rounds);

// C[m x n] = bf16(A[m x k]) * B + bias, then max(0, .) when `relu`, stored saturated to
// finite values; the contract of SgemmPacked otherwise (strides, bias may be null,
// exactly n floats per C row).
// REQUIRES: Bf16KernelsAvailable().ok(); lda >= k, ldc >= n; C does not overlap A.
void SgemmBf16(int m, const float* a, int lda, const PackedMatrixBf16& b, const float* bias,
               bool relu, float* c, int ldc);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_SGEMM_BF16_H_
