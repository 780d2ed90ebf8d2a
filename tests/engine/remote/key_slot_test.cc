#include "engine/remote/key_slot.h"

#include "gtest/gtest.h"

namespace fuserank::remote {
namespace {

TEST(KeySlotTest, Crc16MatchesTheClusterSpecificationsCheckValue) {
  // The Redis Cluster specification's reference: CRC16-XMODEM("123456789") = 0x31C3.
  EXPECT_EQ(Crc16("123456789"), 0x31C3);
  EXPECT_EQ(Crc16(""), 0);
}

TEST(KeySlotTest, SlotsMatchRedisForPlainKeys) {
  // Values of CLUSTER KEYSLOT from redis-server 7.0.
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("123456789"), 0x31C3 % 16384);
}

TEST(KeySlotTest, HashTagsFollowTheSpecification) {
  // Only the span between the first '{' and the next '}' is hashed, when not empty.
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("{user1000}.followers"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("foo{}{bar}"), KeySlot("foo{}{bar}"));
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot("bar"));  // an empty first tag: the whole key
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));
  EXPECT_EQ(KeySlot("no-close{tag"), KeySlot("no-close{tag"));
}

}  // namespace
}  // namespace fuserank::remote
