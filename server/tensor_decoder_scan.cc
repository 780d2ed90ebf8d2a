// TensorDecoder's checks of a request's wire bytes before it is parsed
// (infer_request_scan.h): each bound is one a valid request never passes, so a request
// refused here would have been refused by Append() after parsing, only later and larger.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/kserve_tensors.h"
#include "server/logging.h"
#include "server/tensor_decoder.h"

namespace fuserank::server {

absl::Status TensorDecoder::CheckScannedCounts(const InferRequestTop& top) const {
  if (top.inputs > num_inputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs: ", top.inputs, " input tensors, but model '", model_name_,
                     "' takes at most ", num_inputs(),
                     " (per table t: t, t__lengths and t__weights; then user_dense, item_dense and "
                     "item_ids); send each input once"));
  }
  if (top.outputs > kNumOutputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("outputs: ", top.outputs, " outputs requested, but model '", model_name_,
                     "' has ", kNumOutputs, " (scores, indices, item_ids); ask for each once"));
  }
  if (top.raw_input_contents > top.inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw_input_contents: ", top.raw_input_contents, " entries for ", top.inputs,
                     " inputs; send one per input, in the order of inputs, or none"));
  }
  return absl::OkStatus();
}

TensorType TensorDecoder::TypeOf(const InputRef& ref) {
  switch (ref.role) {
    case Role::kIds:
    case Role::kItemIds:
      return TensorType::kInt64;
    case Role::kLengths:
      return TensorType::kInt32;
    case Role::kWeights:
    case Role::kUserDense:
    case Role::kItemDense:
      break;
  }
  return TensorType::kFp32;
}

int64_t TensorDecoder::MaxElements(const InputRef& ref) const {
  const int64_t candidates = limits_.max_candidates;
  const bool user = ref.table >= 0 && tables_[ref.table].side == engine::Side::kUser;
  switch (ref.role) {
    case Role::kIds:
    case Role::kWeights:
      return std::min<int64_t>((user ? 1 : candidates) * limits_.max_ids_per_feature,
                               limits_.max_ids);
    case Role::kLengths:
      return user ? 1 : candidates;
    case Role::kUserDense:
      return dense_user_;
    case Role::kItemDense:
      return candidates * dense_item_;
    case Role::kItemIds:
      return candidates;
  }
  return 0;
}

std::string TensorDecoder::WhyMax(const InputRef& ref) const {
  const bool user = ref.table >= 0 && tables_[ref.table].side == engine::Side::kUser;
  switch (ref.role) {
    case Role::kIds:
    case Role::kWeights:
      return user ? "server.max_ids_per_feature, for the one bag of a user-side table"
                  : "server.max_ids_per_feature per candidate, server.max_candidates "
                    "candidates, at most engine.max_batch_ids";
    case Role::kLengths:
      return user ? "one bag: a user-side table" : "one per candidate, server.max_candidates";
    case Role::kUserDense:
      return absl::StrCat("model '", model_name_, "' takes ", dense_user_, " user dense values");
    case Role::kItemDense:
      return absl::StrCat("server.max_candidates rows of the ", dense_item_,
                          " item dense values model '", model_name_, "' takes");
    case Role::kItemIds:
      return "server.max_candidates";  // CheckScannedInput gives Append's message instead
  }
  return "";
}

absl::Status TensorDecoder::CheckScannedInput(const ScannedInput& input, ScanTally* tally) const {
  auto it = inputs_.find(input.name);
  if (it == inputs_.end()) return UnknownInput(input.name);
  const InputRef& ref = it->second;
  int* slot = SlotIn(ref, &tally->inputs);
  if (*slot >= 0) return GivenTwice(input.name, *slot, input.index);
  *slot = input.index;
  if (input.bytes_values > 0) {  // no input is BYTES; each entry would parse into a string
    return absl::InvalidArgumentError(
        absl::StrCat(input.name, ": contents.bytes_contents holds ", input.bytes_values,
                     " values, but input '", input.name, "' is ", TensorTypeName(TypeOf(ref)),
                     "; send its values in contents.", ContentsField(TypeOf(ref))));
  }
  const int64_t most = MaxElements(ref);
  if (input.elements > most && ref.role == Role::kItemIds) {  // Append's message, and Rank's
    return absl::InvalidArgumentError(absl::StrCat("item_ids: ", input.elements,
                                                   " candidates exceed server.max_candidates (",
                                                   limits_.max_candidates, ")"));
  }
  if (input.elements > most) {
    return absl::InvalidArgumentError(absl::StrCat(
        input.name, ": its contents hold ", input.elements, " values, more than input '",
        input.name, "' can hold (", most, ": ", WhyMax(ref), ")"));
  }
  int64_t* total = ref.role == Role::kIds       ? &tally->ids
                   : ref.role == Role::kWeights ? &tally->weights
                                                : nullptr;
  if (total != nullptr) {
    *total += input.elements;
    if (*total > limits_.max_ids) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the request holds at least ", *total, ref.role == Role::kIds ? " ids" : " weights",
          " in its contents, more than engine.max_batch_ids (", limits_.max_ids, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status TensorDecoder::CheckWire(absl::string_view wire, InferRequestTop* top,
                                      WireInputs* out) const {
  if (absl::Status s = CheckScannedCounts(*top); !s.ok()) return s;
  ScanTally tally;
  tally.inputs.table.assign(tables_.size(), {-1, -1, -1});
  if (absl::Status s = ScanInferInputs(
          wire, top, [&](const ScannedInput& input) { return CheckScannedInput(input, &tally); });
      !s.ok()) {
    return s;
  }
  if (out != nullptr) {
    out->inputs = std::move(tally.inputs);
    out->count = top->inputs;
  }
  return absl::OkStatus();
}

}  // namespace fuserank::server
