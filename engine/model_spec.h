// The model spec YAML of SPEC section 2, parsed into plain structs (engine/model_types.h)
// and validated. Pure functions of their arguments and the file system; thread-safe.
#ifndef FUSERANK_ENGINE_MODEL_SPEC_H_
#define FUSERANK_ENGINE_MODEL_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model_types.h"

namespace fuserank::engine {

// The largest spec file ParseModelSpecFile reads (a spec is a few hundred bytes per table).
inline constexpr uint64_t kMaxModelSpecBytes = 1 << 20;

// Parses and validates a spec file; errors name the file and the field. Only a regular file
// of at most kMaxModelSpecBytes is read (engine/regular_file.h: a FIFO, device or directory
// is FAILED_PRECONDITION at once, a missing file NOT_FOUND). Values quoted back in messages
// are escaped and cut (engine/escape_text.h); name, version and table names must be
// printable UTF-8 of at most 256 bytes.
absl::StatusOr<ModelSpec> ParseModelSpecFile(const std::string& path);
// Parses YAML text; `weights_path` is resolved against `base_dir`.
absl::StatusOr<ModelSpec> ParseModelSpec(const std::string& yaml_text, const std::string& base_dir);
// Checks that a spec is self-consistent (dot widths, top_mlp ends in 1, ...).
absl::Status ValidateModelSpec(const ModelSpec& spec);
// Writes `spec` as YAML (weights written as the file name only).
std::string ModelSpecToYaml(const ModelSpec& spec);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_MODEL_SPEC_H_
