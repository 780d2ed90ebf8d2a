#include "bench/kserve/infer_request.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace fuserank::bench {
namespace {

using inference::ModelInferRequest;
using Input = ModelInferRequest::InferInputTensor;

Input* AddInput(const std::string& name, const char* datatype, std::vector<int64_t> shape,
                ModelInferRequest* request) {
  Input* input = request->add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  for (int64_t dim : shape) input->add_shape(dim);
  return input;
}

// The bag of table `name` in `features`, or nullptr.
const v1::Feature* FindBag(const google::protobuf::RepeatedPtrField<v1::Feature>& features,
                           const std::string& name) {
  for (const v1::Feature& feature : features) {
    if (feature.name() == name) return &feature;
  }
  return nullptr;
}

void AddTable(const engine::TableSpec& table, const v1::RankRequest& request,
              const InferRequestOptions& options, ModelInferRequest* out) {
  std::vector<const v1::Feature*> bags;
  if (table.side == engine::Side::kUser) {
    bags.push_back(FindBag(request.user_features(), table.name));
  } else {
    for (const v1::Candidate& c : request.candidates())
      bags.push_back(FindBag(c.features(), table.name));
  }
  bool any_ids = false;
  bool any_weights = false;
  for (const v1::Feature* bag : bags) {
    any_ids |= bag != nullptr && bag->ids_size() > 0;
    any_weights |= bag != nullptr && bag->weights_size() > 0;
  }
  if (!any_ids && !options.every_table) return;
  inference::InferTensorContents ids;
  inference::InferTensorContents lengths;
  inference::InferTensorContents weights;
  for (const v1::Feature* bag : bags) {
    const int count = bag == nullptr ? 0 : bag->ids_size();
    lengths.add_int_contents(count);
    for (int i = 0; i < count; ++i) {
      ids.add_int64_contents(bag->ids(i));
      if (any_weights) weights.add_fp32_contents(bag->weights_size() > 0 ? bag->weights(i) : 1.0f);
    }
  }
  const int64_t total = ids.int64_contents_size();
  *AddInput(table.name, "INT64", {total}, out)->mutable_contents() = std::move(ids);
  *AddInput(table.name + "__lengths", "INT32", {static_cast<int64_t>(bags.size())}, out)
       ->mutable_contents() = std::move(lengths);
  if (any_weights) {
    *AddInput(table.name + "__weights", "FP32", {total}, out)->mutable_contents() =
        std::move(weights);
  }
}

template <typename T>
void AppendBytes(const google::protobuf::RepeatedField<T>& values, std::string* out) {
  out->resize(values.size() * sizeof(T));
  if (values.size() > 0) std::memcpy(out->data(), values.data(), out->size());
}

// Moves every input's typed contents into raw_input_contents.
void ToRaw(ModelInferRequest* request) {
  for (Input& input : *request->mutable_inputs()) {
    std::string* raw = request->add_raw_input_contents();
    const inference::InferTensorContents& c = input.contents();
    if (input.datatype() == "INT64") AppendBytes(c.int64_contents(), raw);
    if (input.datatype() == "INT32") AppendBytes(c.int_contents(), raw);
    if (input.datatype() == "FP32") AppendBytes(c.fp32_contents(), raw);
    input.clear_contents();
  }
}

template <typename T, typename Format>
std::string JsonArray(const google::protobuf::RepeatedField<T>& values, Format format) {
  std::string out = "[";
  for (int i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += format(values[i]);
  }
  return out + "]";
}

}  // namespace

ModelInferRequest ToInferRequest(const engine::ModelSpec& spec, const v1::RankRequest& request,
                                 const InferRequestOptions& options) {
  ModelInferRequest out;
  out.set_model_name(request.model());
  out.set_id(request.request_id());
  if (request.top_k() != 0) (*out.mutable_parameters())["top_k"].set_int64_param(request.top_k());
  for (const engine::TableSpec& table : spec.tables) AddTable(table, request, options, &out);
  const int64_t n = request.candidates_size();
  if (spec.dense_user > 0 || request.user_dense_size() > 0) {
    Input* dense = AddInput("user_dense", "FP32", {1, request.user_dense_size()}, &out);
    *dense->mutable_contents()->mutable_fp32_contents() = request.user_dense();
  }
  if (spec.dense_item > 0) {
    Input* dense = AddInput("item_dense", "FP32", {n, spec.dense_item}, &out);
    for (const v1::Candidate& c : request.candidates()) {
      dense->mutable_contents()->mutable_fp32_contents()->Add(c.dense().begin(), c.dense().end());
    }
  }
  Input* ids = AddInput("item_ids", "INT64", {n}, &out);
  for (const v1::Candidate& c : request.candidates())
    ids->mutable_contents()->add_int64_contents(c.item_id());
  if (options.contents == TensorContents::kRaw) ToRaw(&out);
  return out;
}

std::string PerfAnalyzerEntry(const ModelInferRequest& request) {
  std::vector<std::string> fields;
  for (const Input& input : request.inputs()) {
    const inference::InferTensorContents& c = input.contents();
    std::string content;
    if (input.datatype() == "INT64") {
      content = JsonArray(c.int64_contents(), [](int64_t v) { return absl::StrCat(v); });
    } else if (input.datatype() == "INT32") {
      content = JsonArray(c.int_contents(), [](int32_t v) { return absl::StrCat(v); });
    } else {
      content = JsonArray(c.fp32_contents(), [](float v) { return absl::StrFormat("%.9g", v); });
    }
    fields.push_back(absl::StrCat("\"", input.name(), "\":{\"content\":", content, ",\"shape\":[",
                                  absl::StrJoin(input.shape(), ","), "]}"));
  }
  return absl::StrCat("{", absl::StrJoin(fields, ","), "}");
}

}  // namespace fuserank::bench
