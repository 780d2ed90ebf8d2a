// The model's types, shared by every engine (the CPU engine and the CUDA module link them
// from the engine core): the enums of a spec, the spec's plain structs, and the widths the
// spec implies (z, concat(V), the interaction's output), written once here so no engine
// recomputes them. The YAML reading and validation of a spec: engine/model_spec.h.
// Plain data: copyable, no synchronisation needed.
#ifndef FUSERANK_ENGINE_MODEL_TYPES_H_
#define FUSERANK_ENGINE_MODEL_TYPES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
// Bytes of one stored element: 4 (fp32), 2 (fp16, bf16), 1 (int8; its per-row scale and
// bias are kept apart).
int DTypeBytes(DType dtype);

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
  // The vectors the dot interaction pairs: z (when there are dense features), then one per
  // table.
  int dot_vectors() const;
  // Input width of top_mlp[0] as served (after the linear cross is folded in; for dcn the
  // cross network's output x_L, as wide as concat(V)).
  int interaction_width() const;
  // True when some table is storage: redis.
  bool has_remote_tables() const;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_MODEL_TYPES_H_
