// The rdma plugin's message framing: a fixed 32-byte prefix, then the
// message header, then its payload.
//
//   offset  size  field
//        0     4  magic "WRDM"
//        4     2  version (1)
//        6     2  flags (none defined; a reader ignores them)
//        8     4  header length
//       12     4  reserved (0)
//       16     8  payload length
//       24     8  sequence number (0 for a connection's first message)
//
// All integers little-endian. A frame is written into the peer's receive
// ring in chunks of at most one ring slot; a chunk carries bytes of one
// message only, and the first chunk of a message starts with the prefix.
// FrameAssembler puts the chunks back together on the receiving side.
//
// Everything here is bounded: a length over the configured maximum, a bad
// magic or version, a truncated frame or a sequence number out of order is
// refused with a message naming what was wrong, and no buffer is sized from
// a length read off the wire before that length has been checked.
//
// Not thread-safe; one assembler per connection, fed in completion order.
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_FRAME_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "rdma/result.h"

namespace weft::rdma {

inline constexpr uint32_t kFrameMagic = 0x4D445257;  // "WRDM" in little-endian order
inline constexpr uint16_t kFrameVersion = 1;
inline constexpr std::size_t kFramePrefixSize = 32;

// The largest header and payload a connection accepts, in either direction.
struct FrameLimits {
  uint32_t max_header_size = 64 * 1024;
  uint64_t max_payload_size = uint64_t{1} << 30;
};

// The fields of a frame prefix.
struct FramePrefix {
  uint32_t header_size = 0;
  uint64_t payload_size = 0;
  uint64_t sequence = 0;
};

// Writes the prefix for |prefix| into |out|. INVALID_ARGUMENT when the
// header or payload is larger than |limits| allows (the peer would refuse
// the frame).
Result<Ok> EncodeFramePrefix(const FramePrefix& prefix, const FrameLimits& limits,
                             std::span<uint8_t, kFramePrefixSize> out);

// Reads and checks a prefix: DATA_LOSS for fewer than kFramePrefixSize
// bytes, a bad magic, another version, or a length over |limits|. Bytes
// after the prefix are not looked at.
Result<FramePrefix> DecodeFramePrefix(std::span<const uint8_t> bytes, const FrameLimits& limits);

// A whole frame in one buffer, as views into it.
struct FrameView {
  FramePrefix prefix;
  std::span<const uint8_t> header;
  std::span<const uint8_t> payload;
  // kFramePrefixSize + header + payload: where the next frame would start.
  std::size_t frame_size = 0;
};

// Decodes the frame at the start of |bytes| (which may hold more after it).
// The prefix errors of DecodeFramePrefix, and DATA_LOSS when |bytes| ends
// before the header and payload the prefix announces.
Result<FrameView> DecodeFrame(std::span<const uint8_t> bytes, const FrameLimits& limits);

// Encodes a whole frame into one buffer (tests, and the side of the send
// path that copies into a bounce buffer).
Result<std::vector<uint8_t>> EncodeFrame(uint64_t sequence, std::span<const uint8_t> header,
                                         std::span<const uint8_t> payload, const FrameLimits& limits);

// A message put back together from its chunks.
struct AssembledMessage {
  uint64_t sequence = 0;
  uint32_t header_size = 0;
  // Header then payload, contiguous.
  std::vector<uint8_t> bytes;

  std::span<const uint8_t> header() const { return std::span<const uint8_t>(bytes).first(header_size); }
  std::span<const uint8_t> payload() const { return std::span<const uint8_t>(bytes).subspan(header_size); }
};

// Reassembles messages from ring-slot chunks, checking each against the
// limits and the expected sequence number.
class FrameAssembler {
 public:
  explicit FrameAssembler(FrameLimits limits) : limits_(limits) {}

  // Consumes the next chunk. Returns the message this chunk completed, or
  // nullopt when more chunks of it are due. A failure (DATA_LOSS) means
  // the stream is corrupt; the assembler refuses every chunk after it.
  Result<std::optional<AssembledMessage>> Consume(std::span<const uint8_t> chunk);

  // Whether a message is partly received.
  bool in_message() const noexcept { return in_message_; }
  // The sequence number the next message must carry.
  uint64_t next_sequence() const noexcept { return next_sequence_; }

 private:
  FrameLimits limits_;
  bool in_message_ = false;
  bool broken_ = false;
  uint64_t next_sequence_ = 0;
  uint64_t expected_total_ = 0;
  AssembledMessage current_;
};

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_FRAME_H_
