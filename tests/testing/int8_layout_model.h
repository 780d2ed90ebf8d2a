// An int8 model whose weights file places its tables' qparams aligned or not: the case of
// third-party safetensors writers that put an odd-sized I8 table before its F32 qparams,
// which Model::Load copies again into aligned memory. Written by hand (engine's writer
// always aligns). Test helper; not thread-safe.
#ifndef FUSERANK_TESTS_TESTING_INT8_LAYOUT_MODEL_H_
#define FUSERANK_TESTS_TESTING_INT8_LAYOUT_MODEL_H_

#include <cstdint>
#include <string>

namespace fuserank::testing {

// Writes <dir>/m.yaml and <dir>/m.safetensors: int8 tables 'u' (user) and 'i' (item) of
// `rows` rows (odd) and dim 1, dot, top_mlp [1]. `misaligned`: each table's weight comes
// right before its qparams, so both qparams (8 x rows bytes each) start at offsets that are
// not a multiple of 4; otherwise the F32 tensors come first and every tensor is aligned.
// Returns the spec path.
std::string WriteInt8LayoutModel(const std::string& dir, int64_t rows, bool misaligned);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_TESTING_INT8_LAYOUT_MODEL_H_
