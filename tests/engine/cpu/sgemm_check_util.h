// The check the SGEMM tests (cpu_sgemm_test.cc, cpu_sgemm_bf16_test.cc) make of a kernel
// C = A W^T (+ bias) (ReLU): run for ReLU and bias off and on over a poisoned C, every
// element against a double-precision product written here, and nothing written past n
// columns (or into an m = 0 C). Pure test code; thread-compatible.
#ifndef FUSERANK_TESTS_ENGINE_CPU_SGEMM_CHECK_UTIL_H_
#define FUSERANK_TESTS_ENGINE_CPU_SGEMM_CHECK_UTIL_H_

#include "absl/functional/function_ref.h"
#include "gtest/gtest.h"

namespace fuserank::engine::test {

// What the kernels' output starts as, so that a skipped or stray write shows.
inline constexpr float kPoison = -12345.0f;

// An operand element as the kernel should see it: A(i, p) or W(j, p) (W is [n, k]).
using GemmOperand = absl::FunctionRef<double(int row, int p)>;
// Runs the kernel on [m, k] x [k, n] into `c` (ldc floats a row), with `bias` (null: none).
using GemmKernel = absl::FunctionRef<void(const float* bias, bool relu, float* c)>;

// For relu and bias each off and on: `gemm` into a C of max(m, 1) rows of `ldc` floats, all
// kPoison, then each c[i, j] within 1e-5 * (1 + sum |terms|) of the double product, and
// columns n..ldc-1 (and c[0] when m = 0) still kPoison. The first mismatch fails.
::testing::AssertionResult GemmMatchesDoubleProduct(int m, int n, int k, GemmOperand a,
                                                    GemmOperand w, const float* bias, int ldc,
                                                    GemmKernel gemm);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_CPU_SGEMM_CHECK_UTIL_H_
