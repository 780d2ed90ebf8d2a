// The rows fuserank-load-redis writes: one table read from a safetensors tensor or a
// key-value dump, checked whole when opened (so bad input writes nothing) and then handed
// out one batch at a time (so memory holds one batch, not the table; a dump read from a
// pipe or stdin, which cannot be read twice, is held whole). Each value is a
// row's bytes in the model's embedding_dtype (int8: the codes, then scale and bias as
// float32), as storage: redis tables read them (docs/remote-tables.md).
// A RowSource is used by one thread.
#ifndef FUSERANK_TOOLS_LOAD_REDIS_ROWS_H_
#define FUSERANK_TOOLS_LOAD_REDIS_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fuserank::tools {

// One round's rows: keys[i] and the value bytes[ends[i-1] .. ends[i]).
struct RowBatch {
  std::vector<int64_t> keys;
  std::string bytes;
  std::vector<size_t> ends;

  void Clear();
  std::string_view value(size_t i) const;
};

class RowSource {
 public:
  virtual ~RowSource() = default;
  // Rows in all.
  virtual size_t rows() const = 0;
  // Replaces *batch with the next (up to) `max` rows; an empty batch at the end. An error
  // only if the input changed after it was checked.
  virtual absl::Status Next(size_t max, RowBatch* batch) = 0;
};

struct SafetensorsRowsOptions {
  std::string path;     // the safetensors file
  std::string tensor;   // a [rows, dim] F32, F16, BF16 or I8 tensor
  std::string qparams;  // I8: its F32 [rows, 2] (scale, bias); "" = tensor's name
                        // with .qparams for .weight
  std::string keys;     // a file of one int64 key per row; "" = the row index
  std::string dtype;    // "" or the model's embedding_dtype, which must be the tensor's
};

// Errors name the file, the tensor or the key file's line (a key given twice: both lines).
absl::StatusOr<std::unique_ptr<RowSource>> OpenSafetensorsRows(
    const SafetensorsRowsOptions& options);

// Lines "<id> <v_1> ... <v_dim>" (dtype int8: "<id> <scale> <bias> <q_1> ... <q_dim>"),
// fields separated by spaces or tabs; dtype is fp32, fp16, bf16 or int8. fp16 and bf16
// values are rounded to nearest even and refused when that overflows. A dump without rows,
// a folder, and an id on two lines (which would load last-wins) are refused. Errors name
// the file and line (an id twice: both lines).
absl::StatusOr<std::unique_ptr<RowSource>> OpenDumpRows(const std::string& path,
                                                        const std::string& dtype);

}  // namespace fuserank::tools

#endif  // FUSERANK_TOOLS_LOAD_REDIS_ROWS_H_
