#include "server/kserve_tensors.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace fuserank::server {

absl::string_view OutputName(Output output) {
  switch (output) {
    case Output::kScores:
      return kScores;
    case Output::kIndices:
      return kIndices;
    case Output::kItemIds:
      return kItemIds;
  }
  return "";
}

absl::string_view DatatypeName(inference::DataType type) {
  switch (type) {
    case inference::TYPE_INT64:
      return "INT64";
    case inference::TYPE_INT32:
      return "INT32";
    case inference::TYPE_FP32:
      return "FP32";
    default:
      return "INVALID";
  }
}

std::vector<TensorSpec> ModelInputs(const engine::ModelSpec& spec) {
  std::vector<TensorSpec> inputs;
  for (const engine::TableSpec& table : spec.tables) {
    const bool user = table.side == engine::Side::kUser;
    inputs.push_back({table.name, inference::TYPE_INT64, {-1}, true});
    inputs.push_back(
        {absl::StrCat(table.name, kLengthsSuffix), inference::TYPE_INT32, {user ? 1 : -1}, true});
    inputs.push_back({absl::StrCat(table.name, kWeightsSuffix), inference::TYPE_FP32, {-1}, true});
  }
  if (spec.dense_user > 0) {
    inputs.push_back({std::string(kUserDense), inference::TYPE_FP32, {1, spec.dense_user}, false});
  }
  if (spec.dense_item > 0) {
    inputs.push_back({std::string(kItemDense), inference::TYPE_FP32, {-1, spec.dense_item}, false});
  }
  inputs.push_back({std::string(kItemIds), inference::TYPE_INT64, {-1}, false});
  return inputs;
}

std::vector<TensorSpec> ModelOutputs() {
  return {{std::string(kScores), inference::TYPE_FP32, {-1}, false},
          {std::string(kIndices), inference::TYPE_INT32, {-1}, false},
          {std::string(kItemIds), inference::TYPE_INT64, {-1}, false}};
}

namespace {

void AddTensor(
    const TensorSpec& tensor,
    google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* out) {
  inference::ModelMetadataResponse::TensorMetadata* meta = out->Add();
  meta->set_name(tensor.name);
  meta->set_datatype(std::string(DatatypeName(tensor.type)));
  for (int64_t dim : tensor.shape) meta->add_shape(dim);
}

}  // namespace

void FillModelMetadata(const std::string& name, const engine::ModelSpec& spec,
                       inference::ModelMetadataResponse* out) {
  out->Clear();
  out->set_name(name);
  out->add_versions(spec.version);
  out->set_platform(std::string(kPlatform));
  for (const TensorSpec& input : ModelInputs(spec)) AddTensor(input, out->mutable_inputs());
  for (const TensorSpec& output : ModelOutputs()) AddTensor(output, out->mutable_outputs());
}

void FillModelConfig(const std::string& name, const engine::ModelSpec& spec,
                     inference::ModelConfig* out) {
  out->Clear();
  out->set_name(name);
  out->set_platform(std::string(kPlatform));
  out->set_backend(std::string(kPlatform));
  out->set_max_batch_size(0);  // requests carry whole shapes; fuserank batches them itself
  for (const TensorSpec& tensor : ModelInputs(spec)) {
    inference::ModelInput* input = out->add_input();
    input->set_name(tensor.name);
    input->set_data_type(tensor.type);
    for (int64_t dim : tensor.shape) input->add_dims(dim);
    input->set_optional(tensor.optional);
  }
  for (const TensorSpec& tensor : ModelOutputs()) {
    inference::ModelOutput* output = out->add_output();
    output->set_name(tensor.name);
    output->set_data_type(tensor.type);
    for (int64_t dim : tensor.shape) output->add_dims(dim);
  }
  (*out->mutable_parameters())["version"].set_string_value(spec.version);
  (*out->mutable_parameters())["interaction"].set_string_value(
      std::string(engine::InteractionName(spec.interaction)));
}

int64_t ItemIdsShape(const inference::ModelInferRequest& request) {
  int64_t candidates = 0;
  for (const auto& input : request.inputs()) {
    if (input.name() == kItemIds && input.shape_size() >= 1) candidates = input.shape(0);
  }
  return std::max<int64_t>(candidates, 0);
}

}  // namespace fuserank::server
