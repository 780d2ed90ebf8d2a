#include "tests/engine/cpu/sgemm_check_util.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace fuserank::engine::test {

::testing::AssertionResult GemmMatchesDoubleProduct(int m, int n, int k, GemmOperand a,
                                                    GemmOperand w, const float* bias, int ldc,
                                                    GemmKernel gemm) {
  for (bool relu : {false, true}) {
    for (bool with_bias : {false, true}) {
      std::vector<float> c(static_cast<size_t>(std::max(m, 1)) * ldc, kPoison);
      gemm(with_bias ? bias : nullptr, relu, c.data());
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double sum = with_bias ? bias[j] : 0.0, scale = 1.0;
          for (int p = 0; p < k; ++p) {
            const double term = a(i, p) * w(j, p);
            sum += term;
            scale += std::fabs(term);
          }
          if (relu) sum = std::max(sum, 0.0);
          const float got = c[static_cast<size_t>(i) * ldc + j];
          if (!(std::fabs(got - sum) <= 1e-5 * scale)) {
            return ::testing::AssertionFailure()
                   << "c[" << i << ", " << j << "] = " << got << ", want " << sum << " +- "
                   << 1e-5 * scale << " (relu=" << relu << " bias=" << with_bias << ")";
          }
        }
        for (int j = n; j < ldc; ++j) {
          if (c[static_cast<size_t>(i) * ldc + j] != kPoison) {
            return ::testing::AssertionFailure()
                   << "wrote past n: c[" << i << ", " << j << "] (relu=" << relu
                   << " bias=" << with_bias << ")";
          }
        }
      }
      if (m == 0 && c[0] != kPoison) {
        return ::testing::AssertionFailure()
               << "wrote into an m = 0 C (relu=" << relu << " bias=" << with_bias << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace fuserank::engine::test
