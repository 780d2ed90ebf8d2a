#include "server/tensor_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_macros.h"
#include "engine/tensor_shape.h"
#include "server/batch_mark.h"
#include "server/kserve_tensors.h"
#include "server/logging.h"

namespace fuserank::server {
namespace {

using engine::ShapeString;
using engine::Side;
using inference::ModelInferRequest;

// The request parameter `top_k` (0 when absent), capped at 2^32 - 1 like RankRequest.top_k.
absl::StatusOr<uint32_t> TopK(const ModelInferRequest& request) {
  auto it = request.parameters().find(std::string(kTopK));
  if (it == request.parameters().end()) return 0u;
  const inference::InferParameter& p = it->second;
  uint64_t value = 0;
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param && p.int64_param() >= 0) {
    value = static_cast<uint64_t>(p.int64_param());
  } else if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) {
    value = p.uint64_param();
  } else {
    return absl::InvalidArgumentError(
        "parameters.top_k: must be an int64 parameter >= 0 (0: every candidate, sorted)");
  }
  return static_cast<uint32_t>(std::min<uint64_t>(value, std::numeric_limits<uint32_t>::max()));
}

// The first non-finite value of `values`, or -1.
int64_t FirstNonFinite(const float* values, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return -1;
}

}  // namespace

absl::Status TensorDecoder::GivenTwice(absl::string_view name, int first, int second) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, ": input '", name, "' is given twice (inputs[", first, "] and inputs[",
                   second, "]); send each input once"));
}

TensorDecoder::TensorDecoder(const engine::Model& model, DecodeLimits limits,
                             std::string served_name)
    : model_name_(served_name.empty() ? model.spec().name : std::move(served_name)),
      dense_user_(model.spec().dense_user),
      dense_item_(model.spec().dense_item),
      limits_(limits) {
  keyed_ = model.spec().has_remote_tables();
  for (const engine::EmbeddingTable& table : model.tables()) {
    const int t = static_cast<int>(tables_.size());
    tables_.push_back({table.name, table.side, table.rows, table.oov, table.remote});
    inputs_[table.name] = {Role::kIds, t};
    inputs_[absl::StrCat(table.name, kLengthsSuffix)] = {Role::kLengths, t};
    inputs_[absl::StrCat(table.name, kWeightsSuffix)] = {Role::kWeights, t};
  }
  user_order_ = model.user_tables();
  item_order_ = model.item_tables();
  inputs_[std::string(kUserDense)] = {Role::kUserDense, -1};
  inputs_[std::string(kItemDense)] = {Role::kItemDense, -1};
  inputs_[std::string(kItemIds)] = {Role::kItemIds, -1};
}

absl::Status TensorDecoder::Append(const ModelInferRequest& request,
                                   const std::shared_ptr<const engine::Model>& model,
                                   engine::Batch* batch, InferRequestInfo* info,
                                   const WireInputs* scanned) const {
  const bool was_empty = batch->model == nullptr;
  if (was_empty) {
    batch->model = model;
  } else if (batch->model != model) {
    return absl::InternalError("a request was decoded into a batch of another model");
  }
  const BatchMark mark(*batch);
  absl::Status status = AppendImpl(request, scanned, batch, info);
  if (!status.ok()) {
    mark.Restore(batch);
    if (was_empty) batch->model.reset();
  }
  return status;
}

absl::Status TensorDecoder::AppendImpl(const ModelInferRequest& request, const WireInputs* scanned,
                                       engine::Batch* batch, InferRequestInfo* info) const {
  RETURN_IF_ERROR(CheckContentKind(request));
  Inputs resolved;
  const bool use_scanned = scanned != nullptr && scanned->count == request.inputs_size();
  if (!use_scanned) RETURN_IF_ERROR(Resolve(request, &resolved));
  const Inputs& inputs = use_scanned ? scanned->inputs : resolved;
  if (inputs.item_ids < 0) {
    return absl::InvalidArgumentError(
        "item_ids: missing; send the candidates' item ids (INT64 [N], N candidates; N = 0 "
        "for none)");
  }
  ASSIGN_OR_RETURN(const TensorView ids,
                   ViewInput(request, inputs.item_ids, TensorType::kInt64, 1));
  if (ids.elements > limits_.max_candidates) {
    return absl::InvalidArgumentError(absl::StrCat("item_ids: ", ids.elements,
                                                   " candidates exceed server.max_candidates (",
                                                   limits_.max_candidates, ")"));
  }
  const int n = static_cast<int>(ids.elements);
  ASSIGN_OR_RETURN(const uint32_t top_k, TopK(request));
  RETURN_IF_ERROR(AppendUserDense(request, inputs.user_dense, &batch->user_dense));
  ColumnSet columns(tables_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    RETURN_IF_ERROR(ViewTable(request, inputs.table[t], static_cast<int>(t), n, &columns[t]));
  }
  // The bound Rank applies (request_decoder.cc), before anything is appended: the batcher
  // and the engines size their buffers by it.
  int64_t total_ids = 0;
  for (const Columns& column : columns) total_ids += column.ids.size();
  if (total_ids > limits_.max_ids) {
    return absl::InvalidArgumentError(absl::StrCat("the request holds ", total_ids,
                                                   " ids, more than engine.max_batch_ids (",
                                                   limits_.max_ids, ")"));
  }
  for (int t : user_order_) {
    const int64_t count = columns[t].lengths.empty() ? 0 : columns[t].lengths[0];
    RETURN_IF_ERROR(AppendBag(t, count, &columns[t], &batch->user));
  }
  ASSIGN_OR_RETURN(const Column<float> dense, ViewItemDense(request, inputs.item_dense, n));
  RETURN_IF_ERROR(AppendItems(columns, dense, n, batch));
  batch->candidate_begin.push_back(batch->candidate_begin.back() + static_cast<uint32_t>(n));
  batch->top_k.push_back(top_k == 0 || top_k >= static_cast<uint32_t>(n) ? n : top_k);
  info->num_candidates = n;
  info->item_ids = AsColumn<int64_t>(ids);
  return absl::OkStatus();
}

int* TensorDecoder::SlotIn(const InputRef& ref, Inputs* inputs) {
  switch (ref.role) {
    case Role::kIds:
    case Role::kLengths:
    case Role::kWeights:
      return &inputs->table[ref.table][static_cast<int>(ref.role)];
    case Role::kUserDense:
      return &inputs->user_dense;
    case Role::kItemDense:
      return &inputs->item_dense;
    case Role::kItemIds:
      break;
  }
  return &inputs->item_ids;
}

absl::Status TensorDecoder::Resolve(const ModelInferRequest& request, Inputs* inputs) const {
  inputs->table.assign(tables_.size(), {-1, -1, -1});
  for (int k = 0; k < request.inputs_size(); ++k) {
    const std::string& name = request.inputs(k).name();
    auto it = inputs_.find(name);
    if (it == inputs_.end()) return UnknownInput(name);
    int* slot = SlotIn(it->second, inputs);
    if (*slot >= 0) return GivenTwice(name, *slot, k);
    *slot = k;
  }
  return absl::OkStatus();
}

absl::Status TensorDecoder::UnknownInput(absl::string_view name) const {
  absl::string_view table = name;
  if (absl::EndsWith(table, kLengthsSuffix)) table.remove_suffix(kLengthsSuffix.size());
  if (absl::EndsWith(table, kWeightsSuffix)) table.remove_suffix(kWeightsSuffix.size());
  // The name is the client's: quoted cut to LogSafe's length, not copied whole.
  return absl::InvalidArgumentError(
      absl::StrCat(LogSafe(name), ": model '", model_name_, "' has no table named '",
                   LogSafe(table), "' (user-side tables: ", TableNames(Side::kUser),
                   "; item-side tables: ", TableNames(Side::kItem),
                   "; per table t the inputs are t, t__lengths and t__weights; "
                   "the others are user_dense, item_dense and item_ids)"));
}

absl::Status TensorDecoder::ViewTable(const ModelInferRequest& request,
                                      const std::array<int, 3>& sent, int t, int candidates,
                                      Columns* out) const {
  const Table& table = tables_[t];
  if (sent[0] >= 0) {
    ASSIGN_OR_RETURN(const TensorView ids, ViewInput(request, sent[0], TensorType::kInt64, 1));
    out->ids = AsColumn<int64_t>(ids);
  }
  if (sent[1] >= 0) {
    ASSIGN_OR_RETURN(const TensorView lengths, ViewInput(request, sent[1], TensorType::kInt32, 1));
    const bool user = table.side == Side::kUser;
    const int64_t bags = user ? 1 : candidates;
    if (lengths.elements != bags) {
      return absl::InvalidArgumentError(absl::StrCat(
          table.name, kLengthsSuffix, ": table '", table.name, "' is ",
          user ? "a user-side table; send one bag (shape [1])"
               : absl::StrCat("an item-side table; send one bag per candidate (shape [", candidates,
                              "], as item_ids)"),
          ", got shape ", ShapeString(lengths.shape)));
    }
    out->lengths = AsColumn<int32_t>(lengths);
  } else if (!out->ids.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        table.name, ": ", out->ids.size(), " ids but no input ", table.name, kLengthsSuffix,
        "; send the length of every bag (INT32, ", table.side == Side::kUser ? "[1]" : "[N]", ")"));
  }
  if (sent[2] >= 0) {
    ASSIGN_OR_RETURN(const TensorView weights, ViewInput(request, sent[2], TensorType::kFp32, 1));
    out->weights = AsColumn<float>(weights);
    if (out->weights.size() != out->ids.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          table.name, kWeightsSuffix, ": ", out->weights.size(), " weights for ", out->ids.size(),
          " ids of table '", table.name, "'; send one weight per id, or none"));
    }
    for (int64_t i = 0; i < out->weights.size(); ++i) {
      if (!std::isfinite(out->weights[i])) {
        return absl::InvalidArgumentError(absl::StrCat(table.name, kWeightsSuffix, "[", i,
                                                       "]: must be a finite number, got ",
                                                       out->weights[i]));
      }
    }
  }
  return CheckLengths(table, *out);
}

absl::Status TensorDecoder::CheckLengths(const Table& table, const Columns& columns) const {
  int64_t total = 0;
  for (int64_t b = 0; b < columns.lengths.size(); ++b) {
    const int32_t length = columns.lengths[b];
    if (length < 0) {
      return absl::InvalidArgumentError(absl::StrCat(table.name, kLengthsSuffix, "[", b,
                                                     "]: ", length, " is no bag length (>= 0)"));
    }
    if (length > limits_.max_ids_per_feature) {
      return absl::InvalidArgumentError(absl::StrCat(
          table.name, kLengthsSuffix, "[", b, "]: ", length, " ids for table '", table.name,
          "' exceed server.max_ids_per_feature (", limits_.max_ids_per_feature, ")"));
    }
    total += length;
  }
  if (total != columns.ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat(table.name, kLengthsSuffix, ": the bags hold ",
                                                   total, " ids in all, but ", table.name, " has ",
                                                   columns.ids.size()));
  }
  return absl::OkStatus();
}

absl::Status TensorDecoder::AppendUserDense(const ModelInferRequest& request, int input,
                                            std::vector<float>* out) const {
  Column<float> values;
  if (input >= 0) {
    ASSIGN_OR_RETURN(const TensorView view, ViewInput(request, input, TensorType::kFp32, 2));
    if (view.shape[0] != 1) {
      return absl::InvalidArgumentError(absl::StrCat("user_dense: shape ", ShapeString(view.shape),
                                                     ": send one row (shape [1, ", dense_user_,
                                                     "]): one user per request"));
    }
    values = AsColumn<float>(view);
  }
  if (values.size() != dense_user_) {
    return absl::InvalidArgumentError(absl::StrCat("user_dense: model '", model_name_, "' takes ",
                                                   dense_user_, " user dense values, got ",
                                                   values.size()));
  }
  const size_t base = out->size();
  out->resize(base + static_cast<size_t>(dense_user_));
  values.CopyTo(0, dense_user_, out->data() + base);
  const int64_t bad = FirstNonFinite(out->data() + base, dense_user_);
  if (bad >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("user_dense[", bad, "]: must be a finite number, got ", (*out)[base + bad]));
  }
  return absl::OkStatus();
}

absl::StatusOr<Column<float>> TensorDecoder::ViewItemDense(const ModelInferRequest& request,
                                                           int input, int candidates) const {
  if (input < 0) {
    if (dense_item_ > 0 && candidates > 0) {
      return absl::InvalidArgumentError(absl::StrCat("item_dense: model '", model_name_, "' takes ",
                                                     dense_item_, " item dense values, got 0"));
    }
    return Column<float>();
  }
  ASSIGN_OR_RETURN(const TensorView view, ViewInput(request, input, TensorType::kFp32, 2));
  if (view.shape[0] != candidates) {
    return absl::InvalidArgumentError(
        absl::StrCat("item_dense: shape ", ShapeString(view.shape), ": send one row per candidate",
                     " (shape [", candidates, ", ", dense_item_, "], as item_ids)"));
  }
  if (candidates > 0 && view.shape[1] != dense_item_) {
    return absl::InvalidArgumentError(absl::StrCat("item_dense: model '", model_name_, "' takes ",
                                                   dense_item_, " item dense values, got ",
                                                   view.shape[1]));
  }
  return AsColumn<float>(view);
}

absl::Status TensorDecoder::AppendBag(int t, int64_t count, Columns* columns,
                                      engine::BagSet* bags) const {
  const Table& table = tables_[t];
  const int64_t begin = columns->cursor;
  const size_t base = bags->rows.size();
  bags->rows.resize(base + static_cast<size_t>(count));
  bags->weights.resize(base + static_cast<size_t>(count));
  int32_t* rows = bags->rows.data() + base;
  if (keyed_) {
    bags->keys.resize(base + static_cast<size_t>(count));
    columns->ids.CopyTo(begin, count, bags->keys.data() + base);
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t id = columns->ids[begin + i];
    if (table.remote) {  // addressed by the raw id: the backend stages its row
      rows[i] = 0;
      continue;
    } else if (!engine::MapRow(id, table.rows, table.oov, &rows[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          table.name, "[", begin + i, "]: id ", id, " is out of range for table '", table.name,
          "' (", table.rows, " rows: ids 0..", table.rows - 1, "; oov: reject)"));
    }
  }
  float* weights = bags->weights.data() + base;
  if (columns->weights.empty()) {
    std::fill(weights, weights + count, 1.0f);
  } else {
    columns->weights.CopyTo(begin, count, weights);
  }
  columns->cursor = begin + count;
  bags->bag_begin.push_back(static_cast<uint32_t>(bags->rows.size()));
  return absl::OkStatus();
}

absl::Status TensorDecoder::AppendItems(ColumnSet& columns, const Column<float>& dense,
                                        int candidates, engine::Batch* batch) const {
  const size_t dense_base = batch->item_dense.size();
  const int64_t dense_values = static_cast<int64_t>(candidates) * dense_item_;
  batch->item_dense.resize(dense_base + static_cast<size_t>(dense_values));
  dense.CopyTo(0, dense_values, batch->item_dense.data() + dense_base);
  const int64_t bad = FirstNonFinite(batch->item_dense.data() + dense_base, dense_values);
  if (bad >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("item_dense[", bad / dense_item_, ", ", bad % dense_item_,
                     "]: must be a finite number, got ", batch->item_dense[dense_base + bad]));
  }
  for (int c = 0; c < candidates; ++c) {
    for (int t : item_order_) {
      Columns& table = columns[t];
      const int64_t count = table.lengths.empty() ? 0 : table.lengths[c];
      RETURN_IF_ERROR(AppendBag(t, count, &table, &batch->item));
    }
  }
  return absl::OkStatus();
}

std::string TensorDecoder::TableNames(Side side) const {
  const std::vector<int>& order = side == Side::kUser ? user_order_ : item_order_;
  std::vector<absl::string_view> names;
  for (int t : order) names.push_back(tables_[t].name);
  if (names.empty()) return "none";
  if (names.size() > 20) {
    names.resize(20);
    return absl::StrCat(absl::StrJoin(names, ", "), ", ...");
  }
  return absl::StrJoin(names, ", ");
}

}  // namespace fuserank::server
