// The checks Model::Load makes before it reads a weights file and while it builds a model:
// the file's type and size against what the spec implies, the memory limit, and finite
// table values. Pure functions of their arguments and the file system; thread-safe.
#ifndef FUSERANK_ENGINE_MODEL_CHECKS_H_
#define FUSERANK_ENGINE_MODEL_CHECKS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model.h"
#include "engine/model_spec.h"
#include "engine/regular_file.h"

namespace fuserank::engine {

// The spec's weights file, open, with the header length its first 8 bytes give.
struct OpenedWeights {
  RegularFile file;
  uint64_t header_len = 0;
};

// Opens the weights file of `spec` (a regular file only) and checks it before any more of
// it is read: at least 8 bytes, a header length within the format's limit, and no more
// bytes than the header and the spec's tensors take (a smaller file is left to the tensor
// checks, which can say which tensor is short). INVALID_ARGUMENT naming the path, the sizes
// and the tensors whose shapes differ, or RegularFile::Open's errors.
absl::StatusOr<OpenedWeights> OpenWeights(const ModelSpec& spec);

// The most tensors the header of a weights file of `spec` may describe (engine/safetensors.h):
// kMaxSafetensorsTensors, or as many as the spec names when it names more.
size_t MaxWeightsTensors(const ModelSpec& spec);

// Bytes of the tables the header of `weights` places misaligned (MisalignedTableBytes of
// engine/model_memory.h): the header is read (it is within the format's limit); 0 when it
// cannot be read or parsed (the load refuses that file anyway).
uint64_t MisalignedWeightsBytes(const OpenedWeights& weights, const ModelSpec& spec);

// RESOURCE_EXHAUSTED when the model part of the estimate (ModelMemory::model()) for a
// weights file of `file_bytes` (0: tensors in memory) with `copied_bytes` of misaligned
// tables exceeds `max_bytes` (0: no limit).
absl::Status CheckModelMemory(const ModelSpec& spec, uint64_t file_bytes, uint64_t max_bytes,
                              uint64_t copied_bytes = 0);

// "" when every value of `table` is finite (int8: every (scale, bias) gives finite values),
// else the problem naming the table and the first bad row.
std::string NonFiniteTableProblem(const EmbeddingTable& table);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_MODEL_CHECKS_H_
