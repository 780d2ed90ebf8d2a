// fuserank-load-redis's rows from a tensor of a safetensors file: the file is mapped, not
// read, and handed out a batch at a time; its keys, from --keys, are held (8 bytes a row,
// 24 while they are checked for one given twice). Used by one thread (tools/load_redis_rows.h).
#ifndef FUSERANK_TOOLS_LOAD_REDIS_SAFETENSORS_ROWS_H_
#define FUSERANK_TOOLS_LOAD_REDIS_SAFETENSORS_ROWS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tools/load_redis_rows.h"

namespace fuserank::tools {

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

}  // namespace fuserank::tools

#endif  // FUSERANK_TOOLS_LOAD_REDIS_SAFETENSORS_ROWS_H_
