// The tcp transport's wire framing: every message is a 16-byte preamble
// followed by its header bytes and its payload bytes.
//
//   offset  size  field
//   0       4     magic "WFT1"
//   4       4     header size, little-endian
//   8       8     payload size, little-endian
//
// The receiver checks the preamble before it allocates anything, so a
// garbled or hostile stream costs at most |max_message_bytes|.
#ifndef WEFT_PLUGINS_TRANSPORTS_TCP_FRAMING_H_
#define WEFT_PLUGINS_TRANSPORTS_TCP_FRAMING_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace weft::transports::tcp {

inline constexpr std::size_t kPreambleSize = 16;
inline constexpr unsigned char kMagic[4] = {'W', 'F', 'T', '1'};

struct Preamble {
  uint32_t header_size = 0;
  uint64_t payload_size = 0;
};

inline void EncodePreamble(uint32_t header_size, uint64_t payload_size, unsigned char out[kPreambleSize]) {
  for (int i = 0; i < 4; ++i) out[i] = kMagic[i];
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<unsigned char>(header_size >> (8 * i));
  for (int i = 0; i < 8; ++i) out[8 + i] = static_cast<unsigned char>(payload_size >> (8 * i));
}

// Decodes |in| into |out|. Returns "" when it is a valid preamble of a
// message of at most |max_message_bytes| bytes, else the reason, for a
// person ("bad magic 47 45 54 20 (not a Weft tcp peer?)").
inline std::string DecodePreamble(const unsigned char in[kPreambleSize], uint64_t max_message_bytes, Preamble* out,
                                  const char* limit_source = "[transports.tcp] max_message_mb") {
  bool magic_ok = true;
  for (int i = 0; i < 4; ++i) magic_ok = magic_ok && in[i] == kMagic[i];
  if (!magic_ok) {
    char text[96];
    std::snprintf(text, sizeof text, "bad magic %02x %02x %02x %02x (not a Weft tcp peer, or a garbled stream)", in[0],
                  in[1], in[2], in[3]);
    return text;
  }
  uint32_t header_size = 0;
  uint64_t payload_size = 0;
  for (int i = 0; i < 4; ++i) header_size |= static_cast<uint32_t>(in[4 + i]) << (8 * i);
  for (int i = 0; i < 8; ++i) payload_size |= static_cast<uint64_t>(in[8 + i]) << (8 * i);
  if (payload_size > max_message_bytes || header_size > max_message_bytes - payload_size) {
    return "message of " + std::to_string(header_size) + " header and " + std::to_string(payload_size) +
           " payload bytes exceeds the limit of " + std::to_string(max_message_bytes) + " bytes (" + limit_source + ")";
  }
  out->header_size = header_size;
  out->payload_size = payload_size;
  return {};
}

}  // namespace weft::transports::tcp

#endif  // WEFT_PLUGINS_TRANSPORTS_TCP_FRAMING_H_
