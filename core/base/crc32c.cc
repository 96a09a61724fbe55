#include "core/base/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace weft {
namespace {

// The reflected form of the Castagnoli polynomial 0x1EDC6F41.
constexpr uint32_t kPolynomial = 0x82f63b78u;

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// Slicing-by-8: table[k][b] is the CRC contribution of byte b followed by
// k zero bytes, so eight input bytes are folded with eight lookups.
constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) != 0 ? kPolynomial : 0u);
    t[0][b] = crc;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xffu];
  }
  return t;
}

constexpr Tables kTables = MakeTables();

inline uint32_t Load32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const unsigned char* p, std::size_t n) {
  uint64_t state = ~crc;
  // Byte steps up to 8-byte alignment, then 8 bytes per instruction.
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7u) != 0) {
    state = _mm_crc32_u8(static_cast<uint32_t>(state), *p++);
    --n;
  }
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    state = _mm_crc32_u64(state, word);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    state = _mm_crc32_u8(static_cast<uint32_t>(state), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(state);
}
#endif

bool DetectHardware() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("sse4.2") != 0;
#else
  return false;
#endif
}

}  // namespace

namespace internal {

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t state = ~crc;
  while (size >= 8) {
    const uint32_t low = Load32(p) ^ state;
    const uint32_t high = Load32(p + 4);
    state = kTables[7][low & 0xffu] ^ kTables[6][(low >> 8) & 0xffu] ^ kTables[5][(low >> 16) & 0xffu] ^
            kTables[4][low >> 24] ^ kTables[3][high & 0xffu] ^ kTables[2][(high >> 8) & 0xffu] ^
            kTables[1][(high >> 16) & 0xffu] ^ kTables[0][high >> 24];
    p += 8;
    size -= 8;
  }
  while (size > 0) {
    state = (state >> 8) ^ kTables[0][(state ^ *p++) & 0xffu];
    --size;
  }
  return ~state;
}

uint32_t Crc32cExtendHardware(uint32_t crc, const void* data, std::size_t size) {
#if defined(__x86_64__)
  return ExtendSse42(crc, static_cast<const unsigned char*>(data), size);
#else
  return Crc32cExtendPortable(crc, data, size);
#endif
}

bool Crc32cHardwareAvailable() {
  static const bool available = DetectHardware();
  return available;
}

}  // namespace internal

uint32_t Crc32cExtend(uint32_t crc, const void* data, std::size_t size) {
  if (size == 0) return crc;
  return internal::Crc32cHardwareAvailable() ? internal::Crc32cExtendHardware(crc, data, size)
                                             : internal::Crc32cExtendPortable(crc, data, size);
}

}  // namespace weft
