#include "rdma/frame.h"

#include <cstring>
#include <string>

#include "rdma/wire.h"

namespace weft::rdma {

namespace {

std::string Hex(uint64_t value) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  bool started = false;
  for (int shift = 60; shift >= 0; shift -= 4) {
    const unsigned digit = static_cast<unsigned>(value >> shift) & 0xF;
    if (digit != 0 || started || shift == 0) {
      out += kDigits[digit];
      started = true;
    }
  }
  return out;
}

using std::to_string;

}  // namespace

Result<Ok> EncodeFramePrefix(const FramePrefix& prefix, const FrameLimits& limits,
                             std::span<uint8_t, kFramePrefixSize> out) {
  if (prefix.header_size > limits.max_header_size) {
    return Fail(WEFT_INVALID_ARGUMENT, "rdma frame: header of " + to_string(prefix.header_size) +
                                           " bytes is over the limit of " + to_string(limits.max_header_size) +
                                           " bytes");
  }
  if (prefix.payload_size > limits.max_payload_size) {
    return Fail(WEFT_INVALID_ARGUMENT, "rdma frame: payload of " + to_string(prefix.payload_size) +
                                           " bytes is over the limit of " + to_string(limits.max_payload_size) +
                                           " bytes");
  }
  uint8_t* p = out.data();
  wire::Put<uint32_t>(p + 0, kFrameMagic);
  wire::Put<uint16_t>(p + 4, kFrameVersion);
  wire::Put<uint16_t>(p + 6, 0);
  wire::Put<uint32_t>(p + 8, prefix.header_size);
  wire::Put<uint32_t>(p + 12, 0);
  wire::Put<uint64_t>(p + 16, prefix.payload_size);
  wire::Put<uint64_t>(p + 24, prefix.sequence);
  return Ok{};
}

Result<FramePrefix> DecodeFramePrefix(std::span<const uint8_t> bytes, const FrameLimits& limits) {
  if (bytes.size() < kFramePrefixSize) {
    return Fail(WEFT_DATA_LOSS, "rdma frame: truncated prefix: " + to_string(bytes.size()) + " of " +
                                    to_string(kFramePrefixSize) + " bytes");
  }
  const uint8_t* p = bytes.data();
  const uint32_t magic = wire::Get<uint32_t>(p + 0);
  if (magic != kFrameMagic) {
    return Fail(WEFT_DATA_LOSS, "rdma frame: bad magic " + Hex(magic) + " (expected " + Hex(kFrameMagic) +
                                    " \"WRDM\"); the peer is not a Weft rdma transport or the stream is corrupt");
  }
  const uint16_t version = wire::Get<uint16_t>(p + 4);
  if (version != kFrameVersion) {
    return Fail(WEFT_DATA_LOSS, "rdma frame: version " + to_string(version) + " is not supported (this side speaks " +
                                    to_string(kFrameVersion) + ")");
  }
  FramePrefix prefix;
  prefix.header_size = wire::Get<uint32_t>(p + 8);
  prefix.payload_size = wire::Get<uint64_t>(p + 16);
  prefix.sequence = wire::Get<uint64_t>(p + 24);
  if (prefix.header_size > limits.max_header_size) {
    return Fail(WEFT_DATA_LOSS, "rdma frame: header length " + to_string(prefix.header_size) +
                                    " is over the limit of " + to_string(limits.max_header_size) + " bytes");
  }
  if (prefix.payload_size > limits.max_payload_size) {
    return Fail(WEFT_DATA_LOSS, "rdma frame: payload length " + to_string(prefix.payload_size) +
                                    " is over the limit of " + to_string(limits.max_payload_size) + " bytes");
  }
  return prefix;
}

Result<FrameView> DecodeFrame(std::span<const uint8_t> bytes, const FrameLimits& limits) {
  Result<FramePrefix> prefix = DecodeFramePrefix(bytes, limits);
  if (!prefix.ok()) return prefix.failure();
  // Both lengths are bounded by the limits, so the sum cannot overflow for
  // any limits a uint64_t can hold with room for the prefix.
  const uint64_t body = uint64_t{prefix->header_size} + prefix->payload_size;
  const uint64_t available = bytes.size() - kFramePrefixSize;
  if (body > available) {
    return Fail(WEFT_DATA_LOSS, "rdma frame: truncated: the prefix announces " + to_string(prefix->header_size) +
                                    " header and " + to_string(prefix->payload_size) + " payload bytes, but only " +
                                    to_string(available) + " follow");
  }
  FrameView view;
  view.prefix = *prefix;
  view.header = bytes.subspan(kFramePrefixSize, prefix->header_size);
  view.payload = bytes.subspan(kFramePrefixSize + prefix->header_size, static_cast<std::size_t>(prefix->payload_size));
  view.frame_size = kFramePrefixSize + static_cast<std::size_t>(body);
  return view;
}

Result<std::vector<uint8_t>> EncodeFrame(uint64_t sequence, std::span<const uint8_t> header,
                                         std::span<const uint8_t> payload, const FrameLimits& limits) {
  if (header.size() > limits.max_header_size) {
    return Fail(WEFT_INVALID_ARGUMENT, "rdma frame: header of " + to_string(header.size()) +
                                           " bytes is over the limit of " + to_string(limits.max_header_size) +
                                           " bytes");
  }
  FramePrefix prefix{static_cast<uint32_t>(header.size()), payload.size(), sequence};
  std::vector<uint8_t> out(kFramePrefixSize);
  Result<Ok> encoded =
      EncodeFramePrefix(prefix, limits, std::span<uint8_t, kFramePrefixSize>(out.data(), kFramePrefixSize));
  if (!encoded.ok()) return encoded.failure();
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Result<std::optional<AssembledMessage>> FrameAssembler::Consume(std::span<const uint8_t> chunk) {
  if (broken_) {
    return Fail(WEFT_DATA_LOSS, "rdma frame: the stream is already corrupt; no further chunk is read");
  }
  auto broken = [this](Failure failure) {
    broken_ = true;
    in_message_ = false;
    current_ = AssembledMessage{};
    return failure;
  };
  if (!in_message_) {
    Result<FramePrefix> prefix = DecodeFramePrefix(chunk, limits_);
    if (!prefix.ok()) return broken(prefix.failure());
    if (prefix->sequence != next_sequence_) {
      return broken(Fail(WEFT_DATA_LOSS, "rdma frame: sequence number " + to_string(prefix->sequence) + " where " +
                                             to_string(next_sequence_) +
                                             " was expected; a message was lost or repeated"));
    }
    // Only now, with both lengths checked against the limits, is the
    // buffer sized from them.
    expected_total_ = uint64_t{prefix->header_size} + prefix->payload_size;
    current_ = AssembledMessage{};
    current_.sequence = prefix->sequence;
    current_.header_size = prefix->header_size;
    current_.bytes.reserve(static_cast<std::size_t>(expected_total_));
    in_message_ = true;
    chunk = chunk.subspan(kFramePrefixSize);
  }
  const uint64_t missing = expected_total_ - current_.bytes.size();
  if (chunk.size() > missing) {
    return broken(Fail(WEFT_DATA_LOSS, "rdma frame: a chunk of message " + to_string(current_.sequence) + " carries " +
                                           to_string(chunk.size() - missing) + " bytes past its end (" +
                                           to_string(expected_total_) + " bytes announced)"));
  }
  current_.bytes.insert(current_.bytes.end(), chunk.begin(), chunk.end());
  if (current_.bytes.size() < expected_total_) return std::optional<AssembledMessage>();
  in_message_ = false;
  ++next_sequence_;
  AssembledMessage done = std::move(current_);
  current_ = AssembledMessage{};
  return std::optional<AssembledMessage>(std::move(done));
}

}  // namespace weft::rdma
