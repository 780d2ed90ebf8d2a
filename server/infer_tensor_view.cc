#include "server/infer_tensor_view.h"

#include "absl/strings/str_cat.h"
#include "engine/escape_text.h"
#include "engine/tensor_shape.h"

namespace fuserank::server {
namespace {

using engine::ShapeString;
using inference::ModelInferRequest;

size_t ElementBytes(TensorType type) {
  switch (type) {
    case TensorType::kInt64:
      return sizeof(int64_t);
    case TensorType::kInt32:
      return sizeof(int32_t);
    case TensorType::kFp32:
      return sizeof(float);
  }
  return 1;
}

// The typed contents field of `type`: its name, its elements and their count.
struct TypedContents {
  absl::string_view field;
  const char* data;
  int64_t size;
};

template <typename T>
TypedContents Typed(absl::string_view field, const google::protobuf::RepeatedField<T>& values) {
  return {field, reinterpret_cast<const char*>(values.data()), values.size()};
}

TypedContents ContentsOf(const inference::InferTensorContents& contents, TensorType type) {
  switch (type) {
    case TensorType::kInt64:
      return Typed(ContentsField(type), contents.int64_contents());
    case TensorType::kInt32:
      return Typed(ContentsField(type), contents.int_contents());
    case TensorType::kFp32:
      return Typed(ContentsField(type), contents.fp32_contents());
  }
  return {"", nullptr, 0};
}

// The product of `shape`, or an error naming `name` for a negative or huge dimension.
absl::StatusOr<int64_t> ElementCount(absl::string_view name, absl::Span<const int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": shape ", ShapeString(shape),
                       " has a negative dimension; send the actual sizes"));
    }
    if (__builtin_mul_overflow(count, dim, &count) || count > (int64_t{1} << 40)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": shape ", ShapeString(shape), " holds too many elements"));
    }
  }
  return count;
}

}  // namespace

absl::string_view TensorTypeName(TensorType type) {
  switch (type) {
    case TensorType::kInt64:
      return "INT64";
    case TensorType::kInt32:
      return "INT32";
    case TensorType::kFp32:
      return "FP32";
  }
  return "?";
}

absl::string_view ContentsField(TensorType type) {
  switch (type) {
    case TensorType::kInt64:
      return "int64_contents";
    case TensorType::kInt32:
      return "int_contents";
    case TensorType::kFp32:
      break;
  }
  return "fp32_contents";
}

absl::Status CheckContentKind(const ModelInferRequest& request) {
  const int raw = request.raw_input_contents_size();
  if (raw == 0) return absl::OkStatus();
  if (raw != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "raw_input_contents: ", raw, " entries for ", request.inputs_size(),
        " inputs; send one per input, in the order of `inputs`, or use each input's contents"));
  }
  for (int i = 0; i < request.inputs_size(); ++i) {
    if (request.inputs(i).has_contents()) {
      return absl::InvalidArgumentError(
          absl::StrCat(engine::EscapeText(request.inputs(i).name()),
                       ": has contents while the request uses raw_input_contents; send each "
                       "tensor one way"));  // the name is the client's, not yet checked: as LogSafe
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorView> ViewInput(const ModelInferRequest& request, int index, TensorType type,
                                     int rank) {
  const ModelInferRequest::InferInputTensor& input = request.inputs(index);
  const absl::string_view name = input.name();
  if (input.datatype() != TensorTypeName(type)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": datatype '",
                                                   engine::EscapeText(input.datatype(), 64),
                                                   "', expected ", TensorTypeName(type)));
  }
  TensorView view;
  view.shape = absl::MakeConstSpan(input.shape().data(), input.shape().size());
  if (static_cast<int>(view.shape.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": shape ", ShapeString(view.shape),
                                                   " has ", view.shape.size(),
                                                   " dimensions, expected ", rank));
  }
  auto elements = ElementCount(name, view.shape);
  if (!elements.ok()) return elements.status();
  view.elements = *elements;
  const size_t width = ElementBytes(type);
  if (request.raw_input_contents_size() > 0) {
    const std::string& raw = request.raw_input_contents(index);
    if (raw.size() != static_cast<size_t>(view.elements) * width) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": shape ", ShapeString(view.shape), " holds ", view.elements, " ",
          TensorTypeName(type), " elements (", static_cast<size_t>(view.elements) * width,
          " bytes), raw_input_contents[", index, "] has ", raw.size(), " bytes"));
    }
    view.data = raw.data();
    return view;
  }
  const TypedContents typed = ContentsOf(input.contents(), type);
  // Values in a field the datatype does not read would be parsed for nothing (and are
  // counted against the input's bound before parsing: infer_request_scan.h). Named before
  // the count, which such a request gets wrong only because of them.
  const int64_t others = TypedElements(input.contents()) - typed.size;
  if (others != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": contents holds ", others, " values outside contents.", typed.field,
        ", the only field datatype ", TensorTypeName(type), " reads; leave the others empty"));
  }
  if (typed.size != view.elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": shape ", ShapeString(view.shape), " holds ", view.elements, " ",
        TensorTypeName(type), " elements, contents.", typed.field, " has ", typed.size));
  }
  view.data = typed.data;
  return view;
}

int64_t TypedElements(const inference::InferTensorContents& contents) {
  return int64_t{contents.bool_contents_size()} + contents.int_contents_size() +
         contents.int64_contents_size() + contents.uint_contents_size() +
         contents.uint64_contents_size() + contents.fp32_contents_size() +
         contents.fp64_contents_size() + contents.bytes_contents_size();
}

}  // namespace fuserank::server
