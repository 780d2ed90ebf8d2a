// The safetensors format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, ...,
// "__metadata__": {str: str}}, then the tensor bytes. Parsing returns views into the
// caller's bytes (no copy); writing streams, so a model larger than memory can be made.
// Functions are thread-safe; a SafetensorsWriter belongs to one thread.
#ifndef FUSERANK_ENGINE_SAFETENSORS_H_
#define FUSERANK_ENGINE_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model.h"

namespace fuserank::engine {

// The longest JSON header accepted (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100u << 20;
// The most dimensions a tensor's shape may have (a model's tensors have one or two): a
// header cannot make the parser hold more than a few numbers per tensor.
inline constexpr size_t kMaxSafetensorsDims = 8;
// The most tensors a header may describe unless the caller allows more (Model::Load allows
// as many as its spec names, if more): it bounds the memory a parsed header takes to tens
// of MB, whatever a 100 MiB header of empty tensors says.
inline constexpr size_t kMaxSafetensorsTensors = 65536;

// Bytes per element of a safetensors dtype ("F32" -> 4, "BF16" -> 2, ...); 0 if unknown.
size_t SafetensorsDTypeSize(std::string_view dtype);
// The safetensors dtype of an embedding dtype: "F32", "F16", "BF16", "I8".
std::string_view SafetensorsDType(DType dtype);

// One tensor as the JSON header describes it (offsets into the data section).
struct SafetensorsEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Parses the JSON header alone (the bytes after the 8-byte length), checking its syntax
// and limits as ParseSafetensors does but neither dtypes nor offsets.
absl::StatusOr<std::map<std::string, SafetensorsEntry>> ParseSafetensorsHeader(
    std::string_view json, size_t max_tensors = kMaxSafetensorsTensors);

// Parses a whole safetensors file held in [data, data + size). The views point into it.
// Rejects: a header length past the end or over kMaxSafetensorsHeaderBytes, malformed JSON
// (a key given twice in a tensor included), more than `max_tensors` tensors, a shape of more
// than kMaxSafetensorsDims dimensions, unknown dtypes, negative or overflowing shapes,
// data_offsets out of range, a byte count that is not dtype size * elements, and tensors
// that overlap. `metadata` (optional) receives the "__metadata__" map. Messages quote no
// byte of the file verbatim: names and strings of the header are escaped and cut
// (engine/escape_text.h), syntax errors give the position.
absl::StatusOr<TensorMap> ParseSafetensors(const std::byte* data, size_t size,
                                           std::map<std::string, std::string>* metadata = nullptr,
                                           size_t max_tensors = kMaxSafetensorsTensors);

// Writes a safetensors file in two steps: the header from the tensors' names, dtypes and
// shapes, then their bytes in the same order, streamed through Append() in any chunks.
// The file appears at `path` only on a successful Close() (written to path + ".tmp").
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    std::string dtype;  // safetensors dtype
    std::vector<int64_t> shape;
  };

  static absl::StatusOr<std::unique_ptr<SafetensorsWriter>> Create(
      const std::string& path, std::vector<Entry> entries,
      const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();  // removes the temporary file if Close() did not succeed

  // Appends the next bytes of tensor data (the tensors in entry order, back to back).
  absl::Status Append(const void* bytes, size_t n);
  // Checks every byte was written, flushes and renames the file into place.
  absl::Status Close();

 private:
  SafetensorsWriter(std::string path, std::FILE* file, uint64_t data_bytes)
      : path_(std::move(path)), file_(file), data_bytes_(data_bytes) {}

  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t data_bytes_ = 0;  // expected
  uint64_t written_ = 0;
};

// Writes `tensors` (views with data) to `path`. Tensors are laid out widest dtype first,
// so every tensor's offset is a multiple of its element size.
absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<std::pair<std::string, TensorView>>& tensors);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_SAFETENSORS_H_
