// The model spec YAML of SPEC section 2, parsed into plain structs and validated.
// Plain data: copyable, no synchronisation needed.
#ifndef FUSERANK_ENGINE_MODEL_SPEC_H_
#define FUSERANK_ENGINE_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fuserank::engine {

// How embedding tables are stored. kInt8 is row-wise quantized (see docs/model-format.md).
enum class DType { kF32, kF16, kBF16, kInt8 };
enum class Side { kUser, kItem };
enum class Pooling { kSum, kMean };
enum class Oov { kModulo, kReject };
// Where a table's rows live: in the weights file, or in a Redis Cluster (docs/remote-tables.md).
enum class Storage { kLocal, kRedis };
enum class Interaction { kConcat, kDot, kLinear, kDcn };

std::string_view DTypeName(DType dtype);                    // "fp32", "fp16", "bf16", "int8"
std::string_view InteractionName(Interaction interaction);  // "concat", ..., "dcn"

struct TableSpec {
  std::string name;
  Side side = Side::kItem;
  // 1 .. 2^31-1 (rows are addressed with int32 after the oov mapping); 0 for kRedis, whose
  // rows are addressed by the raw int64 id (no bound, no oov mapping).
  int64_t rows = 0;
  int dim = 0;
  Pooling pooling = Pooling::kSum;
  Oov oov = Oov::kModulo;
  Storage storage = Storage::kLocal;

  bool remote() const { return storage == Storage::kRedis; }
};

// The DCNv2 cross network of `interaction: dcn` (SPEC section 2, step 4).
struct DcnSpec {
  int layers = 0;    // dcn.layers: cross layers L, 1 .. kMaxDcnLayers (required with dcn)
  int low_rank = 0;  // dcn.low_rank: rank R of each layer's U_l V_l; 0 (default): full W_l
};

inline constexpr int kMaxDcnLayers = 64;

struct ModelSpec {
  std::string name;
  std::string version = "1";
  std::string weights_path;  // resolved: absolute, or relative to the working directory
  DType embedding_dtype = DType::kF32;
  std::vector<TableSpec> tables;
  int dense_user = 0;
  int dense_item = 0;
  std::vector<int> bottom_mlp;  // output widths; ReLU after every layer
  Interaction interaction = Interaction::kConcat;
  int cross_dim = 0;         // kLinear only
  DcnSpec dcn;               // kDcn only (all zero otherwise)
  std::vector<int> top_mlp;  // output widths; the last is 1

  int dense_total() const { return dense_user + dense_item; }
  // Width of z (0 when there are no dense features).
  int z_width() const;
  // Width of concat(V) = z_width + sum of table dims.
  int concat_width() const;
  // Input width of top_mlp[0] as served (after the linear cross is folded in; for dcn the
  // cross network's output x_L, as wide as concat(V)).
  int interaction_width() const;
  // True when some table is storage: redis.
  bool has_remote_tables() const;
};

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
