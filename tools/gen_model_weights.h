// The weights of a synthetic model, as fuserank-gen-model writes them: which tensors (the
// layers, then the tables) and their values, drawn from a seed and each tensor's name so
// that the same seed gives the same bytes on every platform, and streamed to the file a
// chunk at a time (a multi-GB model needs a few MB of memory). Plain functions.
#ifndef FUSERANK_TOOLS_GEN_MODEL_WEIGHTS_H_
#define FUSERANK_TOOLS_GEN_MODEL_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model_spec.h"
#include "engine/safetensors.h"

namespace fuserank::tools {

// One tensor of the weights file and how its values are drawn.
struct PlannedTensor {
  engine::SafetensorsWriter::Entry entry;
  float bound = 0;     // layers: uniform in [-bound, bound]
  bool table = false;  // a table: triangular ("normal-ish") with std 1/sqrt(dim)
};

// The tensors of `spec` (REQUIRES: valid): float32 layers first, then the tables in the
// spec's embedding dtype.
std::vector<PlannedTensor> PlanWeights(const engine::ModelSpec& spec);

// The size of the safetensors file of `plan`: the tensors' bytes and a bound on the
// header's (saturates at 2^64 - 1).
uint64_t WeightsFileBytes(const std::vector<PlannedTensor>& plan);

// Writes `plan`'s tensors to `path` (through PATH.tmp, renamed once whole).
absl::Status WriteWeights(const std::vector<PlannedTensor>& plan, uint64_t seed,
                          const std::string& path);

}  // namespace fuserank::tools

#endif  // FUSERANK_TOOLS_GEN_MODEL_WEIGHTS_H_
