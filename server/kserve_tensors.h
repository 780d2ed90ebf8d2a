// The KServe v2 tensors of a fuserank model (SPEC section 6): their names, datatypes and
// shapes, which ModelMetadata and ModelConfig return and TensorDecoder reads. Per table t:
// `t` (INT64 ids, every bag concatenated), `t__lengths` (INT32, one per bag: one bag for a
// user table, one per candidate for an item table), `t__weights` (FP32, one per id); then
// `user_dense` FP32 [1, du], `item_dense` FP32 [N, di], `item_ids` INT64 [N]; request
// parameter `top_k`. Outputs, best first: `scores` FP32, `indices` INT32, `item_ids` INT64.
// Pure functions and constants; thread-safe.
#ifndef FUSERANK_SERVER_KSERVE_TENSORS_H_
#define FUSERANK_SERVER_KSERVE_TENSORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/model_spec.h"
#include "inference/grpc_service.pb.h"
#include "inference/model_config.pb.h"

namespace fuserank::server {

inline constexpr absl::string_view kLengthsSuffix = "__lengths";
inline constexpr absl::string_view kWeightsSuffix = "__weights";
inline constexpr absl::string_view kUserDense = "user_dense";
inline constexpr absl::string_view kItemDense = "item_dense";
inline constexpr absl::string_view kItemIds = "item_ids";  // an input and an output
inline constexpr absl::string_view kScores = "scores";
inline constexpr absl::string_view kIndices = "indices";
inline constexpr absl::string_view kTopK = "top_k";  // request parameter, int64
// ModelMetadata.platform and ModelConfig.platform / backend.
inline constexpr absl::string_view kPlatform = "fuserank";

// The outputs in the order a response lists them when the request names none.
enum class Output { kScores, kIndices, kItemIds };
inline constexpr int kNumOutputs = 3;
absl::string_view OutputName(Output output);

struct TensorSpec {
  std::string name;
  inference::DataType type = inference::TYPE_INVALID;
  std::vector<int64_t> shape;  // -1: any size along that axis
  bool optional = false;
};

// "INT64", "INT32", "FP32" for the config's TYPE_INT64, ...
absl::string_view DatatypeName(inference::DataType type);

// Every input of a model with `spec`: per table (spec order) t, t__lengths, t__weights,
// all optional (a table left out has empty bags); then user_dense when du > 0, item_dense
// when di > 0 (both required), item_ids (required).
std::vector<TensorSpec> ModelInputs(const engine::ModelSpec& spec);
std::vector<TensorSpec> ModelOutputs();

// The candidates a parsed request says it holds: the first dimension of its `item_ids`
// input (0 when it has none, or a negative one). The decoder checks it against the rest.
int64_t ItemIdsShape(const inference::ModelInferRequest& request);

// `name` is the served model's name (models[].name, or the spec's name).
void FillModelMetadata(const std::string& name, const engine::ModelSpec& spec,
                       inference::ModelMetadataResponse* out);
void FillModelConfig(const std::string& name, const engine::ModelSpec& spec,
                     inference::ModelConfig* out);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_KSERVE_TENSORS_H_
