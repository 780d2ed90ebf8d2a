// The rows fuserank-load-redis writes: a RowSource hands out one table's rows a batch at a
// time, each value a row's bytes in the model's embedding_dtype (int8: the codes, then
// scale and bias as float32), as storage: redis tables read them (docs/remote-tables.md).
// The sources, checked whole when opened so that bad input writes nothing:
// tools/load_redis_safetensors_rows.h (a tensor of a weights file) and
// tools/load_redis_dump_rows.h (a key-value dump). A RowSource is used by one thread.
#ifndef FUSERANK_TOOLS_LOAD_REDIS_ROWS_H_
#define FUSERANK_TOOLS_LOAD_REDIS_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

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

// An input file opened for reading: a directory is refused (an ifstream opens one and
// reads nothing), and a failure says why (strerror). InvalidArgument naming the path.
absl::Status OpenInput(const std::string& path, std::ifstream* in);

}  // namespace fuserank::tools

#endif  // FUSERANK_TOOLS_LOAD_REDIS_ROWS_H_
