// Redis Cluster key slots, as the cluster specification defines them: HASH_SLOT =
// CRC16(key) mod 16384, CRC16 being the XMODEM variant (polynomial 0x1021, initial value 0),
// hashed over the key's hash tag when it has one (the bytes between the first '{' and the
// next '}', when that span is not empty). Pure functions; thread-safe.
#ifndef FUSERANK_ENGINE_REMOTE_KEY_SLOT_H_
#define FUSERANK_ENGINE_REMOTE_KEY_SLOT_H_

#include <cstdint>
#include <string_view>

namespace fuserank::remote {

inline constexpr int kClusterSlots = 16384;

// CRC16-XMODEM of `bytes` (CRC16("123456789") == 0x31C3).
uint16_t Crc16(std::string_view bytes);
// The slot of `key` in [0, kClusterSlots), hash tags honoured.
int KeySlot(std::string_view key);

}  // namespace fuserank::remote

#endif  // FUSERANK_ENGINE_REMOTE_KEY_SLOT_H_
