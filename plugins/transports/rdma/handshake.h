// The rdma plugin's side-channel handshake: what two peers tell each other
// over a plain TCP socket before their queue pairs can talk.
//
// Each side sends one message and reads one. The message is a 12-byte
// preamble followed by a body of the length it announces:
//
//   offset  size  field
//        0     4  magic "WRHS"
//        4     2  version (1)
//        6     2  flags (none defined; a reader ignores them)
//        8     4  body length (bytes after the preamble)
//   body:
//       12     4  queue pair number (24 bits)
//       16     4  initial packet sequence number (24 bits)
//       20     2  LID (0 on RoCE, where the GID addresses the port)
//       22     1  port number (1-based)
//       23     1  active MTU (an ibv_mtu value, 1..5 = 256..4096 bytes)
//       24    16  GID
//       40     8  receive ring address
//       48     4  receive ring rkey
//       52     4  receive ring slot count
//       56     4  receive ring slot size in bytes
//       60     2  device name length
//       62     n  device name (not NUL-terminated; informational)
//
// A reader first reads the preamble, checks it with DecodeHandshakePreamble
// (which bounds the body length), and only then reads the body. Every
// field is range-checked; the messages name the field.
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_HANDSHAKE_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_HANDSHAKE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rdma/result.h"

namespace weft::rdma {

inline constexpr uint32_t kHandshakeMagic = 0x53485257;  // "WRHS" in little-endian order
inline constexpr uint16_t kHandshakeVersion = 1;
inline constexpr std::size_t kHandshakePreambleSize = 12;
inline constexpr std::size_t kHandshakeFixedBodySize = 50;
inline constexpr std::size_t kHandshakeMaxDeviceName = 64;
inline constexpr std::size_t kHandshakeMaxBodySize = kHandshakeFixedBodySize + kHandshakeMaxDeviceName;
inline constexpr uint32_t kMaxRingSlots = 1024;
inline constexpr uint32_t kMinSlotSize = 4096;
inline constexpr uint32_t kMaxSlotSize = 64u << 20;

struct HandshakeInfo {
  uint32_t qp_num = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t port = 1;
  uint8_t mtu = 3;
  std::array<uint8_t, 16> gid{};
  uint64_t ring_address = 0;
  uint32_t ring_rkey = 0;
  uint32_t ring_slots = 0;
  uint32_t slot_size = 0;
  std::string device_name;

  bool operator==(const HandshakeInfo&) const = default;
};

// Encodes |info| as preamble plus body. INVALID_ARGUMENT for a field out of
// range (the same checks the decoder makes).
Result<std::vector<uint8_t>> EncodeHandshake(const HandshakeInfo& info);

// Checks the preamble and returns the body length to read next. DATA_LOSS
// for a short preamble, a bad magic, another version, or a body length
// outside [kHandshakeFixedBodySize, kHandshakeMaxBodySize].
Result<uint32_t> DecodeHandshakePreamble(std::span<const uint8_t> preamble);

// Decodes a whole message (preamble and body). DATA_LOSS for what the
// preamble check refuses, a message shorter or longer than the preamble
// announces, a device name length that disagrees with the body length, or a
// field out of range.
Result<HandshakeInfo> DecodeHandshake(std::span<const uint8_t> message);

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_HANDSHAKE_H_
