// Sort keys of the GPU top-K and the choice of its block shape. A score becomes a 32-bit
// key whose ascending unsigned order is descending score order, so a stable ascending
// radix sort of (key, index) puts the best score first and equal scores in index order.
// Pure functions; no CUDA header is needed to include this file.
#ifndef FUSERANK_KERNELS_TOPK_KEYS_H_
#define FUSERANK_KERNELS_TOPK_KEYS_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/hd.h"
#include "kernels/saturate.h"

namespace fuserank::kernels {

FUSERANK_HD uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

FUSERANK_HD float BitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// Monotone map float -> uint32: a < b (as floats, not NaN) iff Ordered(a) < Ordered(b).
// Positive floats get the sign bit set; negative ones are inverted. -0.0 sorts just
// below +0.0.
FUSERANK_HD uint32_t OrderedBits(float f) {
  const uint32_t u = FloatBits(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

FUSERANK_HD float FromOrderedBits(uint32_t k) {
  return BitsToFloat((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}

// Key of every NaN score, whatever its sign and payload: after every number (-inf's key
// is 0xFF800000) and before the padding, so NaNs rank last and among themselves by index,
// as engine::RanksBefore orders them. It maps back to a (negative, quiet) NaN.
inline constexpr uint32_t kNanKey = 0xFFFFFFFEu;

// Key for an ascending sort that yields descending scores (NaN last). Exactly invertible
// for every non-NaN score; every NaN comes back as one NaN.
FUSERANK_HD uint32_t DescendingKey(float score) {
  return score != score ? kNanKey : ~OrderedBits(score);
}
FUSERANK_HD float ScoreFromDescendingKey(uint32_t key) { return FromOrderedBits(~key); }

// Key of the padding slots of a block: after every real score, NaN included (stability
// keeps real items, which come first in the input, ahead even of an equal key).
inline constexpr uint32_t kPaddingKey = 0xFFFFFFFFu;

// The sigmoid that turns the last layer's logit into the score (SPEC section 2, step 5).
FUSERANK_HD float Sigmoid(float logit) {
#if defined(__CUDA_ARCH__)
  return 1.0f / (1.0f + expf(-logit));
#else
  return 1.0f / (1.0f + std::exp(-logit));
#endif
}

// The score of a logit: the sigmoid of the saturated logit, so a logit that overflowed
// (+-Inf) scores 1 or 0 and one that is NaN scores 0.5, never NaN.
FUSERANK_HD float ScoreOfLogit(float logit) { return Sigmoid(SaturateFinite(logit)); }

// Block shapes of the segmented top-K: threads x items per thread sorted by one block.
// A batch runs the smallest shape that holds its longest request.
struct TopKShape {
  int threads;
  int items;
  constexpr int capacity() const { return threads * items; }
};
// One shape per power of two from 32 to 4096 keys, so that a batch never sorts more than
// twice the keys of its longest request.
inline constexpr TopKShape kTopKShapes[] = {{32, 1},  {64, 1},  {128, 1}, {128, 2},
                                            {128, 4}, {256, 4}, {256, 8}, {256, 16}};
inline constexpr int kNumTopKShapes = 8;
// Longest request the GPU sorts; longer ones are ranked on the host.
inline constexpr uint32_t kMaxTopKSegment = 4096;

// Index into kTopKShapes for a batch whose longest request has `max_segment` candidates
// (requests above kMaxTopKSegment use the largest shape and are skipped by the kernel).
inline int TopKShapeIndex(uint32_t max_segment) {
  for (int s = 0; s < kNumTopKShapes; ++s) {
    if (max_segment <= static_cast<uint32_t>(kTopKShapes[s].capacity())) return s;
  }
  return kNumTopKShapes - 1;
}

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_TOPK_KEYS_H_
