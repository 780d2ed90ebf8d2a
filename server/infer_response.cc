#include "server/infer_response.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/escape_text.h"

namespace fuserank::server {
namespace {

// The output parameter of Triton's classification extension (class_count in tritonclient).
constexpr absl::string_view kClassification = "classification";

// Appends one output tensor of `count` elements of T, written by `value(i)`.
template <typename T, typename ValueFn>
void AddOutput(absl::string_view name, absl::string_view datatype, size_t count, ValueFn value,
               inference::ModelInferResponse* response) {
  inference::ModelInferResponse::InferOutputTensor* output = response->add_outputs();
  output->set_name(name.data(), name.size());
  output->set_datatype(datatype.data(), datatype.size());
  output->add_shape(static_cast<int64_t>(count));
  std::string* raw = response->add_raw_output_contents();
  raw->resize(count * sizeof(T));
  char* out = raw->data();
  for (size_t i = 0; i < count; ++i) {
    const T v = value(i);
    std::memcpy(out + i * sizeof(T), &v, sizeof(T));
  }
}

}  // namespace

absl::Status SelectOutputs(const google::protobuf::RepeatedPtrField<
                               inference::ModelInferRequest::InferRequestedOutputTensor>& requested,
                           absl::string_view model, RequestedOutputs* selected) {
  selected->count = 0;
  if (requested.empty()) {
    selected->outputs = {Output::kScores, Output::kIndices, Output::kItemIds};
    selected->count = kNumOutputs;
    return absl::OkStatus();
  }
  unsigned seen = 0;
  for (int i = 0; i < requested.size(); ++i) {
    int found = -1;
    for (int o = 0; o < kNumOutputs; ++o) {
      if (requested[i].name() == OutputName(static_cast<Output>(o))) found = o;
    }
    if (found < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "]: model '", model, "' has no output named '",
          engine::EscapeText(requested[i].name(), 64), "' (outputs: scores, indices, item_ids)"));
    }
    // Triton's classification extension answers BYTES "score:index" labels; fuserank has
    // no classes to name. Scoring it as plain scores would hand such a client numbers
    // where it reads strings, so it is refused. Other output parameters (binary_data,
    // which only HTTP reads) are ignored, as request parameters other than top_k are.
    if (requested[i].parameters().contains(std::string(kClassification))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "].parameters.classification: output '", requested[i].name(),
          "' has no classification form; fuserank returns scores (FP32) and ids only "
          "(scores, indices, item_ids, best first): leave classification out and ask for the "
          "top K with the request parameter top_k"));
    }
    if ((seen & (1u << found)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "]: output '", requested[i].name(), "' is requested twice; ask once"));
    }
    seen |= 1u << found;
    selected->outputs[selected->count++] = static_cast<Output>(found);
  }
  return absl::OkStatus();
}

absl::Status FillInferResponse(const ResponseHeader& header, const RequestedOutputs& selected,
                               absl::Span<const engine::ScoredIndex> items,
                               const Column<int64_t>& item_ids,
                               inference::ModelInferResponse* response) {
  const int64_t n = item_ids.size();
  for (const engine::ScoredIndex& scored : items) {
    if (scored.index >= static_cast<uint64_t>(n)) {
      return absl::InternalError(
          absl::StrCat("the engine returned candidate ", scored.index, " of a request with ", n));
    }
  }
  response->Clear();
  response->set_model_name(header.model_name.data(), header.model_name.size());
  response->set_model_version(header.model_version.data(), header.model_version.size());
  response->set_id(header.id.data(), header.id.size());
  for (int o = 0; o < selected.count; ++o) {
    const absl::string_view name = OutputName(selected.outputs[o]);
    switch (selected.outputs[o]) {
      case Output::kScores:
        AddOutput<float>(
            name, "FP32", items.size(), [&](size_t i) { return items[i].score; }, response);
        break;
      case Output::kIndices:
        AddOutput<int32_t>(
            name, "INT32", items.size(),
            [&](size_t i) { return static_cast<int32_t>(items[i].index); }, response);
        break;
      case Output::kItemIds:
        AddOutput<int64_t>(
            name, "INT64", items.size(), [&](size_t i) { return item_ids[items[i].index]; },
            response);
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace fuserank::server
