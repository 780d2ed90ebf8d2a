// The transport limits of the admin port (server.admin_listen). gRPC's own 4 MiB receive
// limit would refuse, with RESOURCE_EXHAUSTED, a SetHotRows that the hot-row capacity
// allows (SPEC: only more ids than capacity is an error, INVALID_ARGUMENT), so the limit is
// sized for the largest SetHotRows the served models allow; a memory quota and a stream
// bound keep peers without the token from making the port hold unbounded bytes. Pure
// functions of their arguments; thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_LIMITS_H_
#define FUSERANK_SERVER_ADMIN_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace fuserank::server {

// gRPC's default receive limit, the floor of the admin port's.
inline constexpr int kGrpcDefaultMaxReceiveBytes = 4 << 20;

struct AdminLimits {
  int max_receive_message_bytes = kGrpcDefaultMaxReceiveBytes;
  int64_t transport_memory_bytes = 0;  // the port's gRPC resource quota
  int max_concurrent_streams = 0;      // per connection
};

// The largest SetHotRowsRequest a model of `tables` tables can send within a capacity of
// `hot_rows_per_table` ids per table (cache.hot_rows_per_table): 10 bytes per id (the
// longest varint, a negative id), field tags and lengths per table, and the table and model
// names, which fit in a model spec (engine::kMaxModelSpecBytes).
int64_t LargestSetHotRowsBytes(int hot_rows_per_table, size_t tables);

// The admin port's limits for models of at most `max_tables` tables: the receive limit is
// LargestSetHotRowsBytes (at least gRPC's default, at most INT_MAX), the quota room for
// two such messages and 32 MiB more, and as many streams per connection as admin calls can
// be waiting and running.
AdminLimits ResolveAdminLimits(int hot_rows_per_table, size_t max_tables);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_LIMITS_H_
