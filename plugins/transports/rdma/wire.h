// Little-endian integer encoding for the rdma plugin's wire formats (the
// frame prefix and the side-channel handshake). Byte by byte, so that the
// layout does not depend on the host's endianness or struct padding, and
// so that reading never needs an aligned pointer.
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_WIRE_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_WIRE_H_

#include <cstddef>
#include <cstdint>

namespace weft::rdma::wire {

template <class T>
inline void Put(uint8_t* out, T value) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
}

template <class T>
inline T Get(const uint8_t* in) noexcept {
  uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return static_cast<T>(value);
}

}  // namespace weft::rdma::wire

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_WIRE_H_
