// The Admin calls' requests, read from their wire bytes after the token check. The admin
// port has no gRPC receive limit, whose refusal (RESOURCE_EXHAUSTED) SPEC section 3 does
// not allow for a SetHotRows over capacity; instead nothing larger than a valid request
// needs is parsed: a SetHotRows is scanned first (nothing built), a table with more ids
// than the capacity refused naming the capacity and the ids sent, then one larger than the
// largest SetHotRows the served models allow (admin_limits.h); the other requests (names
// and a path) are refused past kMaxSmallAdminRequestBytes. Each refusal is
// INVALID_ARGUMENT. Plain functions; thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_REQUESTS_H_
#define FUSERANK_SERVER_ADMIN_REQUESTS_H_

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/model_spec.h"
#include "fuserank/v1/admin.pb.h"

namespace fuserank::server {

// GetHotRows, RebuildHotRows, ReloadModel: table names (all in one model spec), a model
// name, a path.
inline constexpr int64_t kMaxSmallAdminRequestBytes = 2 * int64_t{engine::kMaxModelSpecBytes};

struct SetHotRowsBounds {
  int hot_rows_per_table = 0;  // cache.hot_rows_per_table
  int64_t max_bytes = 0;       // LargestSetHotRowsBytes for the served models
};

// Checks the ids of every table of the SetHotRowsRequest in `bytes` against the capacity
// without building anything; INVALID_ARGUMENT naming the table, the ids it lists and the
// capacity, or saying the bytes are no SetHotRowsRequest.
absl::Status ScanSetHotRows(absl::string_view bytes, int hot_rows_per_table);

// The SetHotRowsRequest in `bytes`: parsed when within `bounds.max_bytes` (the engine then
// refuses unknown names and sets over capacity); past it INVALID_ARGUMENT, from
// ScanSetHotRows where a table is over capacity, else naming the size.
absl::Status ReadSetHotRows(const grpc::ByteBuffer& bytes, const SetHotRowsBounds& bounds,
                            v1::SetHotRowsRequest* out);

// The request of Admin method `method` in `bytes`, at most kMaxSmallAdminRequestBytes.
absl::Status ReadSmallAdminRequest(const grpc::ByteBuffer& bytes, absl::string_view method,
                                   google::protobuf::MessageLite* out);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_REQUESTS_H_
