#include "rdma/handshake.h"

#include <string>

#include "rdma/wire.h"

namespace weft::rdma {

namespace {

using std::to_string;

// The range checks shared by the encoder (INVALID_ARGUMENT: our own bug or
// configuration) and the decoder (DATA_LOSS: the peer sent it).
Result<Ok> CheckFields(const HandshakeInfo& info, weft_code_t code, const char* who) {
  auto bad = [&](const std::string& what) { return Fail(code, std::string("rdma handshake ") + who + ": " + what); };
  if (info.qp_num > 0xFFFFFF) return bad("queue pair number " + to_string(info.qp_num) + " is over 24 bits");
  if (info.psn > 0xFFFFFF) return bad("packet sequence number " + to_string(info.psn) + " is over 24 bits");
  if (info.port == 0) return bad("port number 0 (ports are numbered from 1)");
  if (info.mtu < 1 || info.mtu > 5) {
    return bad("MTU code " + to_string(info.mtu) + " is not one of 1..5 (256..4096 bytes)");
  }
  if (info.ring_slots < 1 || info.ring_slots > kMaxRingSlots) {
    return bad("ring slot count " + to_string(info.ring_slots) + " is outside 1.." + to_string(kMaxRingSlots));
  }
  if (info.slot_size < kMinSlotSize || info.slot_size > kMaxSlotSize) {
    return bad("ring slot size " + to_string(info.slot_size) + " is outside " + to_string(kMinSlotSize) + ".." +
               to_string(kMaxSlotSize) + " bytes");
  }
  if (info.ring_address == 0) return bad("ring address is null");
  if (info.device_name.size() > kHandshakeMaxDeviceName) {
    return bad("device name of " + to_string(info.device_name.size()) + " bytes is over the limit of " +
               to_string(kHandshakeMaxDeviceName));
  }
  return Ok{};
}

}  // namespace

Result<std::vector<uint8_t>> EncodeHandshake(const HandshakeInfo& info) {
  Result<Ok> checked = CheckFields(info, WEFT_INVALID_ARGUMENT, "to send");
  if (!checked.ok()) return checked.failure();
  const std::size_t body = kHandshakeFixedBodySize + info.device_name.size();
  std::vector<uint8_t> out(kHandshakePreambleSize + body);
  uint8_t* p = out.data();
  wire::Put<uint32_t>(p + 0, kHandshakeMagic);
  wire::Put<uint16_t>(p + 4, kHandshakeVersion);
  wire::Put<uint16_t>(p + 6, 0);
  wire::Put<uint32_t>(p + 8, static_cast<uint32_t>(body));
  wire::Put<uint32_t>(p + 12, info.qp_num);
  wire::Put<uint32_t>(p + 16, info.psn);
  wire::Put<uint16_t>(p + 20, info.lid);
  p[22] = info.port;
  p[23] = info.mtu;
  for (std::size_t i = 0; i < info.gid.size(); ++i) p[24 + i] = info.gid[i];
  wire::Put<uint64_t>(p + 40, info.ring_address);
  wire::Put<uint32_t>(p + 48, info.ring_rkey);
  wire::Put<uint32_t>(p + 52, info.ring_slots);
  wire::Put<uint32_t>(p + 56, info.slot_size);
  wire::Put<uint16_t>(p + 60, static_cast<uint16_t>(info.device_name.size()));
  for (std::size_t i = 0; i < info.device_name.size(); ++i) p[62 + i] = static_cast<uint8_t>(info.device_name[i]);
  return out;
}

Result<uint32_t> DecodeHandshakePreamble(std::span<const uint8_t> preamble) {
  if (preamble.size() < kHandshakePreambleSize) {
    return Fail(WEFT_DATA_LOSS, "rdma handshake: truncated preamble: " + to_string(preamble.size()) + " of " +
                                    to_string(kHandshakePreambleSize) + " bytes");
  }
  const uint8_t* p = preamble.data();
  if (wire::Get<uint32_t>(p) != kHandshakeMagic) {
    return Fail(WEFT_DATA_LOSS,
                "rdma handshake: bad magic; the peer is not a Weft rdma transport (is it a tcp endpoint?)");
  }
  const uint16_t version = wire::Get<uint16_t>(p + 4);
  if (version != kHandshakeVersion) {
    return Fail(WEFT_DATA_LOSS, "rdma handshake: version " + to_string(version) +
                                    " is not supported (this side speaks " + to_string(kHandshakeVersion) + ")");
  }
  const uint32_t body = wire::Get<uint32_t>(p + 8);
  if (body < kHandshakeFixedBodySize || body > kHandshakeMaxBodySize) {
    return Fail(WEFT_DATA_LOSS, "rdma handshake: body length " + to_string(body) + " is outside " +
                                    to_string(kHandshakeFixedBodySize) + ".." + to_string(kHandshakeMaxBodySize) +
                                    " bytes");
  }
  return body;
}

Result<HandshakeInfo> DecodeHandshake(std::span<const uint8_t> message) {
  Result<uint32_t> body = DecodeHandshakePreamble(message);
  if (!body.ok()) return body.failure();
  const std::size_t expected = kHandshakePreambleSize + *body;
  if (message.size() != expected) {
    return Fail(WEFT_DATA_LOSS, std::string("rdma handshake: ") +
                                    (message.size() < expected ? "truncated" : "overlong") +
                                    " message: " + to_string(message.size()) + " bytes where the preamble announces " +
                                    to_string(expected));
  }
  const uint8_t* p = message.data();
  HandshakeInfo info;
  info.qp_num = wire::Get<uint32_t>(p + 12);
  info.psn = wire::Get<uint32_t>(p + 16);
  info.lid = wire::Get<uint16_t>(p + 20);
  info.port = p[22];
  info.mtu = p[23];
  for (std::size_t i = 0; i < info.gid.size(); ++i) info.gid[i] = p[24 + i];
  info.ring_address = wire::Get<uint64_t>(p + 40);
  info.ring_rkey = wire::Get<uint32_t>(p + 48);
  info.ring_slots = wire::Get<uint32_t>(p + 52);
  info.slot_size = wire::Get<uint32_t>(p + 56);
  const uint16_t name_length = wire::Get<uint16_t>(p + 60);
  if (kHandshakeFixedBodySize + name_length != *body) {
    return Fail(WEFT_DATA_LOSS, "rdma handshake: device name length " + to_string(name_length) +
                                    " disagrees with the body length " + to_string(*body));
  }
  info.device_name.assign(reinterpret_cast<const char*>(p + 62), name_length);
  Result<Ok> checked = CheckFields(info, WEFT_DATA_LOSS, "from the peer");
  if (!checked.ok()) return checked.failure();
  return info;
}

}  // namespace weft::rdma
