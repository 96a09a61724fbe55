// CRC32C (Castagnoli, the polynomial 0x1EDC6F41 of iSCSI, ext4 and
// TensorFlow's checkpoints): the checksum of every tensor in a checkpoint
// and of the checkpoint's index.
//
//   uint32_t crc = Crc32c(bytes);
//   // The same, in pieces:
//   uint32_t part = Crc32cExtend(0, first.data(), first.size());
//   part = Crc32cExtend(part, second.data(), second.size());
//
// On x86-64 with SSE4.2 the CRC32 instruction does the work (checked once
// at run time); elsewhere a portable slicing-by-8 table does.
//
// Stored checksums use the masked form (Crc32cMask). A CRC over bytes that
// themselves embed CRCs (an index listing its tensors' checksums, a file
// holding a CRC of its own prefix) is prone to degenerate coincidences; the
// mask rotates and offsets the stored value so that it is no longer a CRC
// of anything nearby. It is LevelDB's and TensorFlow's convention, which
// keeps our files checkable with the tools people already have. The API
// speaks unmasked values; only the file formats store masked ones.
//
// Thread-safe: the functions keep no state beyond tables built once.
#ifndef WEFT_CORE_BASE_CRC32C_H_
#define WEFT_CORE_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft {

// The CRC32C of |crc|'s data followed by |size| bytes at |data|, where |crc|
// is the CRC32C of the data so far (0 for none). So
// Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, std::size_t size);

// The CRC32C of |size| bytes at |data| ("123456789" gives 0xE3069283).
inline uint32_t Crc32c(const void* data, std::size_t size) { return Crc32cExtend(0, data, size); }
inline uint32_t Crc32c(std::string_view data) { return Crc32cExtend(0, data.data(), data.size()); }

// The form in which checksums are stored (see above), and its inverse:
// Crc32cUnmask(Crc32cMask(c)) == c for every c.
inline uint32_t Crc32cMask(uint32_t crc) {
  constexpr uint32_t kMaskDelta = 0xa282ead8u;
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}
inline uint32_t Crc32cUnmask(uint32_t masked) {
  constexpr uint32_t kMaskDelta = 0xa282ead8u;
  const uint32_t rotated = masked - kMaskDelta;
  return (rotated >> 17) | (rotated << 15);
}

namespace internal {
// The two implementations Crc32cExtend chooses between, exposed so that
// tests can check both on any machine. The hardware one must only be
// called when Crc32cHardwareAvailable().
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, std::size_t size);
uint32_t Crc32cExtendHardware(uint32_t crc, const void* data, std::size_t size);
bool Crc32cHardwareAvailable();
}  // namespace internal

}  // namespace weft

#endif  // WEFT_CORE_BASE_CRC32C_H_
