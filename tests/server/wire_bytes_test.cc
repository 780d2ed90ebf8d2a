#include "server/wire_bytes.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

grpc::ByteBuffer Buffer(const std::vector<std::string>& parts) {
  std::vector<grpc::Slice> slices;
  for (const std::string& part : parts) slices.emplace_back(part);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(WireBytesTest, ViewsASingleSliceInPlace) {
  // Large enough to be a shared buffer (gRPC keeps short slices inline, copied with the
  // slice: also no copy into the thread's buffer, but at another address).
  const std::string bytes(1000, 'q');
  const grpc::ByteBuffer message = Buffer({bytes});
  grpc::Slice slice;
  ASSERT_TRUE(message.TrySingleSlice(&slice).ok());
  const WireBytes wire(message);
  EXPECT_EQ(wire.view(), bytes);
  EXPECT_EQ(static_cast<const void*>(wire.view().data()),
            static_cast<const void*>(slice.begin()));  // no copy
  EXPECT_EQ(WireBytes(Buffer({"abcdef"})).view(), "abcdef");
}

TEST(WireBytesTest, CopiesSeveralSlicesIntoOneRun) {
  const WireBytes wire(Buffer({"ab", "", "cde", std::string(3000, 'x')}));
  EXPECT_EQ(wire.view(), "abcde" + std::string(3000, 'x'));
}

TEST(WireBytesTest, AnEmptyMessageIsAnEmptyView) {
  EXPECT_TRUE(WireBytes(Buffer({""})).view().empty());
  EXPECT_TRUE(WireBytes(Buffer({"", ""})).view().empty());
}

TEST(WireBytesTest, EachMessageGetsItsOwnBytesAfterALargeOne) {
  { EXPECT_EQ(WireBytes(Buffer({std::string(3 << 20, 'a'), "b"})).view().size(), (3u << 20) + 1); }
  const WireBytes wire(Buffer({"x", "y"}));
  EXPECT_EQ(wire.view(), "xy");
}

}  // namespace
}  // namespace fuserank::server
