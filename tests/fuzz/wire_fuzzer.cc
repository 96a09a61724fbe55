// libFuzzer target: the decoder of control messages between tasks
// (core/distributed/wire.h). The input is a header length (4 bytes, little
// endian, taken modulo what is left), the header, and the payload.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "core/distributed/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t header_size = 0;
  std::memcpy(&header_size, data, 4);
  data += 4;
  size -= 4;
  header_size = static_cast<uint32_t>(header_size % (size + 1));
  // The payload at a 64-byte boundary, as transports deliver it.
  const size_t payload_size = size - header_size;
  std::shared_ptr<void> payload(std::aligned_alloc(64, (payload_size + 64) / 64 * 64), [](void* p) { std::free(p); });
  if (payload_size > 0) std::memcpy(payload.get(), data + header_size, payload_size);
  auto envelope = weft::dist::DecodeBytes(std::string_view(reinterpret_cast<const char*>(data), header_size),
                                          payload.get(), payload_size, payload, "fuzz");
  if (envelope.ok()) {
    // Whatever decodes must encode again.
    auto encoded = weft::dist::Encode(*envelope);
    (void)encoded;
  }
  return 0;
}
