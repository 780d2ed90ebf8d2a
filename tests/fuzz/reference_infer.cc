#include "tests/fuzz/reference_infer.h"

#include <cstring>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"

namespace fuserank::fuzz {
namespace {

using inference::ModelInferRequest;

// One input's values, whatever their type, as the reference reads them.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> ints;  // INT64 and INT32 values
  std::vector<float> floats;  // FP32 values
  int64_t size() const { return static_cast<int64_t>(ints.size() + floats.size()); }
};

int64_t TypedValues(const inference::InferTensorContents& c) {
  return int64_t{c.bool_contents_size()} + c.int_contents_size() + c.int64_contents_size() +
         c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
         c.fp64_contents_size() + c.bytes_contents_size();
}

// Element `i` of the little-endian `bytes`, as T (the host is little-endian).
template <typename T>
T RawElement(const std::string& bytes, size_t i) {
  T value;
  std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
  return value;
}

// Reads input `k` as `datatype` ("INT64", "INT32" or "FP32") of `rank` dimensions.
bool ReadTensor(const ModelInferRequest& request, int k, const std::string& datatype, int rank,
                Tensor* out, std::string* reason) {
  const ModelInferRequest::InferInputTensor& input = request.inputs(k);
  if (input.datatype() != datatype) {
    *reason = absl::StrCat(input.name(), ": datatype is not ", datatype);
    return false;
  }
  if (input.shape_size() != rank) {
    *reason = absl::StrCat(input.name(), ": not of rank ", rank);
    return false;
  }
  __int128 elements = 1;
  for (int64_t dim : input.shape()) {
    if (dim < 0) {
      *reason = absl::StrCat(input.name(), ": a negative dimension");
      return false;
    }
    elements *= dim;  // rank <= 2: no overflow in 128 bits
    out->shape.push_back(dim);
  }
  const size_t width = datatype == "INT64" ? 8 : 4;
  if (request.raw_input_contents_size() > 0) {
    const std::string& raw = request.raw_input_contents(k);
    if (static_cast<__int128>(raw.size()) != elements * width) {
      *reason = absl::StrCat(input.name(), ": raw bytes do not match the shape");
      return false;
    }
    for (size_t i = 0; i < raw.size() / width; ++i) {
      if (datatype == "INT64") out->ints.push_back(RawElement<int64_t>(raw, i));
      if (datatype == "INT32") out->ints.push_back(RawElement<int32_t>(raw, i));
      if (datatype == "FP32") out->floats.push_back(RawElement<float>(raw, i));
    }
    return true;
  }
  const inference::InferTensorContents& c = input.contents();
  if (datatype == "INT64") out->ints.assign(c.int64_contents().begin(), c.int64_contents().end());
  if (datatype == "INT32") out->ints.assign(c.int_contents().begin(), c.int_contents().end());
  if (datatype == "FP32") out->floats.assign(c.fp32_contents().begin(), c.fp32_contents().end());
  if (TypedValues(c) != out->size()) {
    *reason = absl::StrCat(input.name(), ": values outside its datatype's field");
    return false;
  }
  if (out->size() != elements) {
    *reason = absl::StrCat(input.name(), ": contents do not match the shape");
    return false;
  }
  return true;
}

// The request's inputs by name; false (with `reason`) for an unknown name or one sent twice.
bool IndexInputs(const engine::Model& model, const ModelInferRequest& request,
                 std::map<std::string, int>* index, std::string* reason) {
  std::vector<std::string> known = {"user_dense", "item_dense", "item_ids"};
  for (const engine::EmbeddingTable& table : model.tables()) {
    known.push_back(table.name);
    known.push_back(table.name + "__lengths");
    known.push_back(table.name + "__weights");
  }
  for (int k = 0; k < request.inputs_size(); ++k) {
    const std::string& name = request.inputs(k).name();
    bool is_known = false;
    for (const std::string& n : known) is_known = is_known || n == name;
    if (!is_known) {
      *reason = "an unknown input";
      return false;
    }
    if (index->count(name) != 0) {
      *reason = absl::StrCat(name, ": sent twice");
      return false;
    }
    (*index)[name] = k;
  }
  return true;
}

// The request's top_k parameter as RankRequest.top_k; false when it is of another kind.
bool ReadTopK(const ModelInferRequest& request, uint32_t* top_k) {
  *top_k = 0;
  auto it = request.parameters().find("top_k");
  if (it == request.parameters().end()) return true;
  uint64_t value = 0;
  if (it->second.has_int64_param() && it->second.int64_param() >= 0) {
    value = static_cast<uint64_t>(it->second.int64_param());
  } else if (it->second.has_uint64_param()) {
    value = it->second.uint64_param();
  } else {
    return false;
  }
  const uint64_t most = std::numeric_limits<uint32_t>::max();
  *top_k = static_cast<uint32_t>(value < most ? value : most);
  return true;
}

// One table's three inputs, checked against each other.
struct TableInputs {
  bool sent_lengths = false;
  bool sent_weights = false;
  Tensor ids, lengths, weights;
};

bool ReadTable(const engine::EmbeddingTable& table, const ModelInferRequest& request,
               const std::map<std::string, int>& index, int64_t candidates, TableInputs* out,
               std::string* reason) {
  auto find = [&](const std::string& name) {
    auto it = index.find(name);
    return it == index.end() ? -1 : it->second;
  };
  const int ids = find(table.name);
  const int lengths = find(table.name + "__lengths");
  const int weights = find(table.name + "__weights");
  if (ids >= 0 && !ReadTensor(request, ids, "INT64", 1, &out->ids, reason)) return false;
  if (lengths >= 0) {
    if (!ReadTensor(request, lengths, "INT32", 1, &out->lengths, reason)) return false;
    const int64_t bags = table.side == engine::Side::kUser ? 1 : candidates;
    if (out->lengths.size() != bags) {
      *reason = absl::StrCat(table.name, ": not one length per bag");
      return false;
    }
    int64_t sum = 0;
    for (int64_t length : out->lengths.ints) {
      if (length < 0) {
        *reason = absl::StrCat(table.name, ": a negative length");
        return false;
      }
      sum += length;
    }
    if (sum != out->ids.size()) {
      *reason = absl::StrCat(table.name, ": lengths do not sum to the ids");
      return false;
    }
    out->sent_lengths = true;
  } else if (out->ids.size() > 0) {
    *reason = absl::StrCat(table.name, ": ids without lengths");
    return false;
  }
  if (weights >= 0) {
    if (!ReadTensor(request, weights, "FP32", 1, &out->weights, reason)) return false;
    if (out->weights.size() != out->ids.size()) {
      *reason = absl::StrCat(table.name, ": not one weight per id");
      return false;
    }
    out->sent_weights = true;
  }
  return true;
}

// Adds ids [begin, begin + count) of `in` (and their weights) to `features` as one feature.
void AddFeature(const std::string& name, const TableInputs& in, int64_t begin, int64_t count,
                google::protobuf::RepeatedPtrField<v1::Feature>* features) {
  v1::Feature* feature = features->Add();
  feature->set_name(name);
  for (int64_t i = begin; i < begin + count; ++i) {
    feature->add_ids(in.ids.ints[i]);
    if (in.sent_weights) feature->add_weights(in.weights.floats[i]);
  }
}

// The request's inputs, read and checked against each other.
struct Inputs {
  Tensor item_ids, user_dense, item_dense;
  std::vector<TableInputs> tables;  // model order
  uint32_t top_k = 0;
};

// raw_input_contents: empty, or one per input and no input with contents of its own.
bool OneContentKind(const ModelInferRequest& request, std::string* reason) {
  if (request.raw_input_contents_size() == 0) return true;
  if (request.raw_input_contents_size() != request.inputs_size()) {
    *reason = "raw_input_contents: not one per input";
    return false;
  }
  for (const ModelInferRequest::InferInputTensor& input : request.inputs()) {
    if (input.has_contents()) {
      *reason = "an input has contents beside raw_input_contents";
      return false;
    }
  }
  return true;
}

bool ReadInputs(const engine::Model& model, const server::DecodeLimits& limits,
                const ModelInferRequest& request, Inputs* in, std::string* reason) {
  std::map<std::string, int> index;
  if (!OneContentKind(request, reason) || !IndexInputs(model, request, &index, reason)) {
    return false;
  }
  if (index.count("item_ids") == 0) {
    *reason = "no item_ids";
    return false;
  }
  if (!ReadTensor(request, index["item_ids"], "INT64", 1, &in->item_ids, reason)) return false;
  if (in->item_ids.size() > limits.max_candidates) {
    *reason = "too many candidates";
    return false;
  }
  const int64_t n = in->item_ids.size();
  if (!ReadTopK(request, &in->top_k)) {
    *reason = "top_k of another kind";
    return false;
  }
  if (index.count("user_dense") != 0) {
    if (!ReadTensor(request, index["user_dense"], "FP32", 2, &in->user_dense, reason)) return false;
    if (in->user_dense.shape[0] != 1) {
      *reason = "user_dense: not one row";
      return false;
    }
  }
  in->tables.resize(model.tables().size());
  int64_t total_ids = 0;
  for (size_t t = 0; t < in->tables.size(); ++t) {
    if (!ReadTable(model.tables()[t], request, index, n, &in->tables[t], reason)) return false;
    total_ids += in->tables[t].ids.size();
  }
  if (total_ids > limits.max_ids) {
    *reason = "too many ids in all";
    return false;
  }
  const int dense_item = model.spec().dense_item;
  if (index.count("item_dense") != 0) {
    if (!ReadTensor(request, index["item_dense"], "FP32", 2, &in->item_dense, reason)) return false;
    if (in->item_dense.shape[0] != n || (n > 0 && in->item_dense.shape[1] != dense_item)) {
      *reason = "item_dense: not [N, di]";
      return false;
    }
  } else if (n > 0 && dense_item > 0) {
    *reason = "no item_dense";
    return false;
  }
  return true;
}

// The RankRequest of `in`: one feature per table whose lengths were sent (per candidate for
// an item table, its bag of the concatenated ids), the dense rows, the item ids, top_k.
void ToRankRequest(const engine::Model& model, const Inputs& in, v1::RankRequest* rank) {
  rank->set_top_k(in.top_k);
  for (float v : in.user_dense.floats) rank->add_user_dense(v);
  for (int t : model.user_tables()) {
    const TableInputs& table = in.tables[t];
    if (table.sent_lengths) {
      AddFeature(model.tables()[t].name, table, 0, table.ids.size(), rank->mutable_user_features());
    }
  }
  const int dense_item = model.spec().dense_item;
  std::vector<int64_t> cursor(in.tables.size(), 0);
  for (int64_t c = 0; c < in.item_ids.size(); ++c) {
    v1::Candidate* candidate = rank->add_candidates();
    candidate->set_item_id(in.item_ids.ints[c]);
    for (int d = 0; d < dense_item; ++d) {
      candidate->add_dense(in.item_dense.floats[c * dense_item + d]);
    }
    for (int t : model.item_tables()) {
      const TableInputs& table = in.tables[t];
      if (!table.sent_lengths) continue;
      const int64_t count = table.lengths.ints[c];
      AddFeature(model.tables()[t].name, table, cursor[t], count, candidate->mutable_features());
      cursor[t] += count;
    }
  }
}

}  // namespace

ReferenceInfer ReferenceInferToRank(const engine::Model& model, const server::DecodeLimits& limits,
                                    const ModelInferRequest& request) {
  ReferenceInfer result;
  Inputs in;
  if (!ReadInputs(model, limits, request, &in, &result.reason)) return result;
  ToRankRequest(model, in, &result.rank);
  result.item_ids = in.item_ids.ints;
  result.valid = true;
  return result;
}

}  // namespace fuserank::fuzz
