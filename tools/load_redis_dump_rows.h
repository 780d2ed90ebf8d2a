// fuserank-load-redis's rows from a key-value dump. The check reads the whole dump and
// keeps every row's id (8 bytes a row) until it has found none given twice; a dump file is
// then read again a batch at a time, so the values in memory are one batch's. A dump from
// a pipe or stdin, which cannot be read twice, is held whole from the check. Used by one
// thread (tools/load_redis_rows.h).
#ifndef FUSERANK_TOOLS_LOAD_REDIS_DUMP_ROWS_H_
#define FUSERANK_TOOLS_LOAD_REDIS_DUMP_ROWS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tools/load_redis_rows.h"

namespace fuserank::tools {

// Lines "<id> <v_1> ... <v_dim>" (dtype int8: "<id> <scale> <bias> <q_1> ... <q_dim>"),
// fields separated by spaces or tabs; dtype is fp32, fp16, bf16 or int8. fp16 and bf16
// values are rounded to nearest even and refused when that overflows. A dump without rows,
// a folder, and an id on two lines (which would load last-wins) are refused. Errors name
// the file and line (an id twice: both lines).
absl::StatusOr<std::unique_ptr<RowSource>> OpenDumpRows(const std::string& path,
                                                        const std::string& dtype);

}  // namespace fuserank::tools

#endif  // FUSERANK_TOOLS_LOAD_REDIS_DUMP_ROWS_H_
