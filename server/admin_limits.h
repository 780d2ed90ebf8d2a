// The transport limits of the admin port (server.admin_listen). It has no gRPC receive
// limit: gRPC's refusal is RESOURCE_EXHAUSTED, and SPEC section 3 asks INVALID_ARGUMENT
// (naming the capacity) of a SetHotRows with more ids than the capacity, so the Admin
// service reads every request itself, after the token check, refusing what is larger than
// a valid request needs (admin_requests.h). A memory quota and a stream bound keep peers,
// with or without the token, from making the port hold unbounded bytes: a message larger
// than the quota can hold is reset by the transport. Pure functions of their arguments;
// thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_LIMITS_H_
#define FUSERANK_SERVER_ADMIN_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace fuserank::server {

// gRPC's default receive limit: the quota has room for two messages of at least this.
inline constexpr int64_t kGrpcDefaultMaxReceiveBytes = 4 << 20;

struct AdminLimits {
  int64_t largest_set_hot_rows_bytes = 0;  // LargestSetHotRowsBytes
  int64_t transport_memory_bytes = 0;      // the port's gRPC resource quota
  int max_concurrent_streams = 0;          // per connection
};

// The largest SetHotRowsRequest a model of `tables` tables can send within a capacity of
// `hot_rows_per_table` ids per table (cache.hot_rows_per_table): 11 bytes per id (a tag and
// the longest varint, a negative id, when the ids are not packed), field tags and lengths
// per table, and the table and model names, which fit in a model spec
// (engine::kMaxModelSpecBytes).
int64_t LargestSetHotRowsBytes(int hot_rows_per_table, size_t tables);

// The admin port's limits for models of at most `max_tables` tables: the quota has room
// for two of the largest SetHotRows (at least gRPC's default 4 MiB, at most INT_MAX bytes,
// the most protobuf parses, each) and 32 MiB more, and a connection as many streams as
// admin calls can be waiting and running.
AdminLimits ResolveAdminLimits(int hot_rows_per_table, size_t max_tables);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_LIMITS_H_
