#include "server/admin_limits.h"

#include <algorithm>
#include <climits>

#include "engine/model_spec.h"
#include "server/admin_service.h"

namespace fuserank::server {
namespace {

// One id not packed: its tag (1 byte) and the longest varint (10 bytes).
constexpr int64_t kMaxIdBytes = 11;
// Per table: TableHotRows' tag and length, its name's and its ids' tags and lengths.
constexpr int64_t kTableOverheadBytes = 32;
constexpr int64_t kQuotaSlackBytes = int64_t{32} << 20;

}  // namespace

int64_t LargestSetHotRowsBytes(int hot_rows_per_table, size_t tables) {
  const int64_t ids = std::max(hot_rows_per_table, 0);
  const int64_t n = static_cast<int64_t>(tables);
  // The table names (all in the model's spec) and the model's name: a spec's size each.
  return n * (ids * kMaxIdBytes + kTableOverheadBytes) +
         2 * static_cast<int64_t>(engine::kMaxModelSpecBytes);
}

AdminLimits ResolveAdminLimits(int hot_rows_per_table, size_t max_tables) {
  AdminLimits limits;
  limits.largest_set_hot_rows_bytes = LargestSetHotRowsBytes(hot_rows_per_table, max_tables);
  // protobuf parses no message past INT_MAX bytes: no room for more.
  limits.transport_memory_bytes = 2 * std::clamp<int64_t>(limits.largest_set_hot_rows_bytes,
                                                          kGrpcDefaultMaxReceiveBytes, INT_MAX) +
                                  kQuotaSlackBytes;
  // The calls that can be waiting for the admin workers, the one each runs, GetHotRows.
  limits.max_concurrent_streams = 2 * (kAdminQueueCapacity + 3);
  return limits;
}

}  // namespace fuserank::server
