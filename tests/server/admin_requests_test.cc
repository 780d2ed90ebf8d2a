// admin_requests.h: a SetHotRows is scanned before it is parsed (ids per table against the
// capacity, packed or not, split or not), then bounded by size; the other admin requests
// by a fixed size. Every refusal is INVALID_ARGUMENT with a message naming the bound.
#include "server/admin_requests.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

// `value` as a varint.
std::string Varint(uint64_t value) {
  std::string out;
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
  return out;
}

std::string Field(uint32_t number, const std::string& bytes) {
  return Varint((number << 3) | 2) + Varint(bytes.size()) + bytes;
}

// A TableHotRows of `packed` ids in one packed field and `unpacked` ids one field each.
std::string Table(const std::string& name, int packed, int unpacked, uint64_t id = 7) {
  std::string ids;
  for (int i = 0; i < packed; ++i) ids += Varint(id);
  std::string table = Field(1, name);
  if (packed > 0) table += Field(2, ids);
  for (int i = 0; i < unpacked; ++i) table += Varint(2 << 3) + Varint(id);
  return Field(1, table);
}

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

TEST(ScanSetHotRowsTest, CountsPackedAndUnpackedIdsOfEachTableAgainstTheCapacity) {
  EXPECT_TRUE(ScanSetHotRows(Table("a", 3, 2) + Table("b", 5, 0), 5).ok());
  const absl::Status over = ScanSetHotRows(Table("a", 3, 2) + Table("item", 4, 3), 5);
  EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(over.message(), HasSubstr("table 'item': 7 ids, more than the hot-set capacity"));
  EXPECT_THAT(over.message(), HasSubstr("hot-set capacity 5 (cache.hot_rows_per_table)"));
  // Negative ids (10-byte varints), not packed: 11 bytes each.
  const absl::Status negative = ScanSetHotRows(Table("n", 0, 6, ~uint64_t{0}), 5);
  EXPECT_THAT(negative.message(), HasSubstr("table 'n': 6 ids, more than the hot-set capacity"));
  // A packed field split in two, as protobuf merges it.
  const std::string split =
      Field(1, Field(1, "s") + Field(2, Varint(1) + Varint(2)) + Field(2, Varint(3) + Varint(4)));
  EXPECT_THAT(ScanSetHotRows(split, 3).message(),
              HasSubstr("table 's': 4 ids, more than the hot-set capacity"));
  EXPECT_TRUE(ScanSetHotRows("", 0).ok()) << "no tables";
}

TEST(ScanSetHotRowsTest, SkipsUnknownFieldsAndRefusesBytesThatAreNoRequest) {
  const std::string unknown = Varint((9 << 3) | 0) + Varint(5) + Field(10, "x");
  EXPECT_TRUE(ScanSetHotRows(unknown + Table("a", 2, 0) + Field(2, "model"), 2).ok());
  for (const std::string& broken :
       {std::string("\x0a\x05\x0a"), std::string("\x0a\x02\x10\xff"), std::string("\xff")}) {
    const absl::Status status = ScanSetHotRows(broken, 10);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("no valid fuserank.v1.SetHotRowsRequest"));
  }
}

TEST(ScanSetHotRowsTest, ATableNameInTheMessageIsEscaped) {
  const absl::Status status = ScanSetHotRows(Table("a\nb", 2, 0), 1);
  EXPECT_THAT(status.message(), HasSubstr(R"(table 'a\nb')"));
}

TEST(ReadSetHotRowsTest, ParsesARequestWithinTheBounds) {
  v1::SetHotRowsRequest request;
  ASSERT_TRUE(ReadSetHotRows(Buffer(Table("a", 3, 1) + Field(2, "m")), {4, 1000}, &request).ok());
  ASSERT_EQ(request.tables_size(), 1);
  EXPECT_EQ(request.tables(0).table(), "a");
  EXPECT_EQ(request.tables(0).ids_size(), 4);
  EXPECT_EQ(request.model(), "m");
}

TEST(ReadSetHotRowsTest, PastTheLargestSizeRefusesIdsOverCapacityOrTheSizeWithinItParses) {
  v1::SetHotRowsRequest request;
  const std::string bytes = Table("a", 300, 0) + Table("a", 300, 0);  // 2 x 300 ids
  const absl::Status ids = ReadSetHotRows(Buffer(bytes), {100, 64}, &request);
  EXPECT_EQ(ids.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.message(), HasSubstr("300 ids, more than the hot-set capacity"));
  const absl::Status size = ReadSetHotRows(Buffer(bytes), {300, 64}, &request);
  EXPECT_EQ(size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(size.message(), HasSubstr(std::to_string(bytes.size()) + " bytes, more than"));
  EXPECT_THAT(size.message(), HasSubstr("(64 bytes"));
  EXPECT_EQ(request.tables_size(), 0) << "nothing parsed";
  ASSERT_TRUE(ReadSetHotRows(Buffer(bytes), {100, 100000}, &request).ok())
      << "within the bound the engine answers: an unknown table before the capacity";
  EXPECT_EQ(request.tables(0).ids_size(), 300);
  const absl::Status utf8 = ReadSetHotRows(Buffer(Table("\xff", 1, 0)), {10, 1000}, &request);
  EXPECT_THAT(utf8.message(), HasSubstr("no valid fuserank.v1.SetHotRowsRequest"));
}

TEST(ReadSmallAdminRequestTest, RefusesARequestLargerThanAnyNeeds) {
  v1::ReloadModelRequest reload;
  reload.set_model("m");
  reload.set_path("/models/m.yaml");
  v1::ReloadModelRequest read;
  ASSERT_TRUE(ReadSmallAdminRequest(Buffer(reload.SerializeAsString()), "ReloadModel", &read).ok());
  EXPECT_EQ(read.path(), "/models/m.yaml");
  reload.set_path(std::string(kMaxSmallAdminRequestBytes, 'p'));
  const absl::Status status =
      ReadSmallAdminRequest(Buffer(reload.SerializeAsString()), "ReloadModel", &read);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("the ReloadModel request is"));
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("(", kMaxSmallAdminRequestBytes, " bytes")));
  const absl::Status broken = ReadSmallAdminRequest(Buffer("\xff"), "GetHotRows", &read);
  EXPECT_THAT(broken.message(), HasSubstr("no valid fuserank.v1.ReloadModelRequest"));
}

}  // namespace
}  // namespace fuserank::server
