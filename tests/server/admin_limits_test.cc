// admin_limits.h: the largest SetHotRows covers every request within the capacity,
// ids not packed included, and the quota has room for two of them.
#include "server/admin_limits.h"

#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// `tables` tables of `ids` ids each, -1 (a 10-byte varint) in fields of their own (not
// packed), names of 256 bytes, a model name of 256 bytes: the longest such request.
size_t LongestRequestBytes(int ids, int tables) {
  std::string request;
  for (int t = 0; t < tables; ++t) {
    std::string table = "\x0a";
    AppendVarint(256, &table);
    table += std::string(256, 'a' + t);
    for (int i = 0; i < ids; ++i) {
      table.push_back('\x10');
      AppendVarint(~uint64_t{0}, &table);
    }
    request.push_back('\x0a');
    AppendVarint(table.size(), &request);
    request += table;
  }
  request.push_back('\x12');
  AppendVarint(256, &request);
  return request.size() + 256;
}

// 8 tables of 400,000 ids: 11 bytes an id, 35.2 MB; at 10 bytes an id the bound was short.
TEST(AdminLimitsTest, TheLargestSetHotRowsCoversIdsThatAreNotPacked) {
  for (const auto [ids, tables] : {std::pair{400000, 8}, std::pair{4096, 26}, std::pair{0, 1}}) {
    EXPECT_LE(static_cast<int64_t>(LongestRequestBytes(ids, tables)),
              LargestSetHotRowsBytes(ids, tables))
        << ids << " ids x " << tables << " tables";
  }
}

TEST(AdminLimitsTest, TheQuotaHoldsTwoOfTheLargestAndIsBounded) {
  const AdminLimits small = ResolveAdminLimits(16, 2);
  EXPECT_EQ(small.transport_memory_bytes, 2 * kGrpcDefaultMaxReceiveBytes + (int64_t{32} << 20));
  const AdminLimits large = ResolveAdminLimits(400000, 8);
  EXPECT_EQ(large.largest_set_hot_rows_bytes, LargestSetHotRowsBytes(400000, 8));
  EXPECT_EQ(large.transport_memory_bytes,
            2 * large.largest_set_hot_rows_bytes + (int64_t{32} << 20));
  const AdminLimits huge = ResolveAdminLimits(1 << 29, 1000);
  EXPECT_EQ(huge.transport_memory_bytes, 2 * int64_t{INT_MAX} + (int64_t{32} << 20));
  EXPECT_GT(huge.max_concurrent_streams, 0);
}

}  // namespace
}  // namespace fuserank::server
