// Tensor shape helpers shared by the safetensors reader and writer and the KServe tensor
// views: the element count of a shape, refusing negative dimensions and overflow, and a
// shape as messages write it. Pure functions: thread-safe.
#ifndef FUSERANK_ENGINE_TENSOR_SHAPE_H_
#define FUSERANK_ENGINE_TENSOR_SHAPE_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace fuserank::engine {

// The product of `shape` (1 for no dimensions) in `*out`, or false, `*out` unchanged, on
// a negative dimension or a product past 64 bits.
bool NumElements(absl::Span<const int64_t> shape, uint64_t* out);

// "[2, 3]".
std::string ShapeString(absl::Span<const int64_t> shape);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_TENSOR_SHAPE_H_
