// Keeps a stage's output a number, as the CPU engine does after every stage
// (engine::SaturateNonFinite): +-Inf becomes +-FLT_MAX and NaN becomes 0; finite values
// pass unchanged. The GPU path applies it where its own kernels write (pooled vectors, dot
// products, the logit before the sigmoid), so every score is a number in [0, 1]. Pure
// function; no CUDA header is needed to include this file.
#ifndef FUSERANK_KERNELS_SATURATE_H_
#define FUSERANK_KERNELS_SATURATE_H_

#include <cfloat>

#include "kernels/hd.h"

namespace fuserank::kernels {

FUSERANK_HD float SaturateFinite(float v) {
  const float clamped = v > FLT_MAX ? FLT_MAX : (v < -FLT_MAX ? -FLT_MAX : v);
  return v != v ? 0.0f : clamped;
}

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_SATURATE_H_
