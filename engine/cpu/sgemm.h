// Single-precision matrix product for the CPU engine's MLP layers: C = A * B + bias
// (optionally ReLU), with B packed once at model load into 16-column panels so that the
// micro-kernel of the ISA in use (cpu_simd.h: AVX-512 up to 12 x 32, AVX2+FMA 6 x 16
// register tiles) streams it from cache. A and C are plain row-major with strides. PackedMatrix is
// immutable after packing and may be shared by any number of threads; SgemmPacked itself keeps no
// state.
#ifndef FUSERANK_ENGINE_CPU_SGEMM_H_
#define FUSERANK_ENGINE_CPU_SGEMM_H_

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

namespace fuserank::engine {

// Columns per packed panel (two AVX2 registers).
inline constexpr int kSgemmPanel = 16;

// B (k x n) as ceil(n / 16) panels of k rows x 16 floats, columns past n zero; 64-byte
// aligned. Move-only.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // Packs B = W^T where W is n x k row-major with row stride ldw (a PyTorch nn.Linear
  // weight [out = n, in = k]). `columns`, when not null, picks W's columns: B's row p is
  // W's column columns[p] (k entries), which lets a layer drop or reorder its inputs.
  static PackedMatrix FromTransposed(const float* w, int n, int k, int ldw,
                                     const int* columns = nullptr);

  int k() const { return k_; }
  int n() const { return n_; }
  int panels() const { return (n_ + kSgemmPanel - 1) / kSgemmPanel; }
  // Panel j: k rows of 16 floats.
  const float* panel(int j) const {
    return data_.get() + static_cast<size_t>(j) * k_ * kSgemmPanel;
  }
  // n == 1: B's one column, k contiguous floats (the AVX-512 path runs such a layer, the
  // last of every top MLP, as row dot products); null otherwise.
  const float* column() const { return column_.empty() ? nullptr : column_.data(); }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  int k_ = 0;
  int n_ = 0;
  std::unique_ptr<float[], Free> data_;
  std::vector<float> column_;
};

// The DCNv2 cross epilogue, applied as C is stored: C[i][j] = x0[i][j] * (A * B + bias)[i][j]
// + xl[i][j], x0 row i at x0 + i * ld_x0, xl row i at xl + i * ld_xl. xl may be C itself
// (each element is read before it is written); x0 must not overlap C.
struct CrossEpilogue {
  const float* x0 = nullptr;
  int ld_x0 = 0;
  const float* xl = nullptr;
  int ld_xl = 0;
};

// C[m x n] = A[m x k] * B + bias, then max(0, .) when `relu`, then saturated to finite
// values as it is stored (+-Inf as +-FLT_MAX, NaN as 0: cpu_saturate.h, the engine's rule
// for every stage's output, with no second pass over C). A row i starts at a + i * lda,
// C row i at c + i * ldc; exactly n floats are written per C row.
// `bias` has n floats, or is null for zero. m == 0 returns at once; k == 0 gives bias.
// With `cross`, its epilogue replaces the ReLU (no second pass over C, x0 or xl), and its
// result is what is saturated.
// REQUIRES: lda >= k, ldc >= n; C does not overlap A; !(relu && cross).
void SgemmPacked(int m, const float* a, int lda, const PackedMatrix& b, const float* bias,
                 bool relu, float* c, int ldc, const CrossEpilogue* cross = nullptr);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_SGEMM_H_
