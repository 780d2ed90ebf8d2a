// Zero-copy views of the input tensors of a KServe v2 ModelInferRequest: elements are read
// in place from raw_input_contents (little-endian bytes) or from the typed contents field
// of the tensor's datatype, never copied into a buffer of their own. ViewInput() checks
// that a tensor's datatype, shape and contents agree (INVALID_ARGUMENT naming the tensor).
// A view points into the request and is valid while the request is unchanged.
// Stateless functions and plain values; thread-safe.
#ifndef FUSERANK_SERVER_INFER_TENSOR_VIEW_H_
#define FUSERANK_SERVER_INFER_TENSOR_VIEW_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "inference/grpc_service.pb.h"

namespace fuserank::server {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "raw_input_contents are little-endian: read them on a little-endian host");

// The element types fuserank's tensors use.
enum class TensorType { kInt64, kInt32, kFp32 };

// "INT64", "INT32", "FP32": the v2 datatype string.
absl::string_view TensorTypeName(TensorType type);
// The InferTensorContents field a datatype's typed values travel in: "int64_contents", ...
absl::string_view ContentsField(TensorType type);

// A tensor's elements of type T, read in place. The bytes need not be aligned for T:
// each element is loaded with memcpy, which compiles to one plain load.
template <typename T>
class Column {
 public:
  Column() = default;
  Column(const char* data, int64_t size) : data_(data), size_(size) {}

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const char* bytes() const { return data_; }  // where element 0 is
  T operator[](int64_t i) const {
    T value;
    std::memcpy(&value, data_ + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return value;
  }
  // Copies elements [begin, begin + count) to `out` (memcpy: no per-element work).
  void CopyTo(int64_t begin, int64_t count, T* out) const {
    if (count > 0)
      std::memcpy(out, data_ + begin * static_cast<int64_t>(sizeof(T)),
                  static_cast<size_t>(count) * sizeof(T));
  }

 private:
  const char* data_ = nullptr;
  int64_t size_ = 0;
};

// One input tensor: where its elements are and how many the shape says it has.
struct TensorView {
  const char* data = nullptr;       // element 0 (nullptr when there are none)
  int64_t elements = 0;             // product of `shape`
  absl::Span<const int64_t> shape;  // points into the request
};

// Whether the request carries its tensors as raw bytes: OK when raw_input_contents is
// empty (every tensor in its typed contents) or has one entry per input and no input also
// sets typed contents; else INVALID_ARGUMENT saying which.
absl::Status CheckContentKind(const inference::ModelInferRequest& request);

// The view of `request.inputs(index)`, which must have datatype `type` and `rank`
// dimensions, none negative, with contents (raw or typed) that hold exactly the shape's
// element count, typed ones in the field of the datatype and no other. REQUIRES:
// CheckContentKind(request) is OK.
absl::StatusOr<TensorView> ViewInput(const inference::ModelInferRequest& request, int index,
                                     TensorType type, int rank);

// The values in every typed field of `contents` together.
int64_t TypedElements(const inference::InferTensorContents& contents);

template <typename T>
Column<T> AsColumn(const TensorView& view) {
  return Column<T>(view.data, view.elements);
}

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_INFER_TENSOR_VIEW_H_
