// CRC32C against published vectors (RFC 3720 appendix B.4, the "check"
// value of the CRC catalogue) and values from a bit-at-a-time Python
// implementation of the reflected polynomial 0x82F63B78.
#include "core/base/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft {
namespace {

// Both implementations, so the portable one is checked on machines with
// SSE4.2 and vice versa.
struct Impl {
  const char* name;
  uint32_t (*extend)(uint32_t, const void*, std::size_t);
};

std::vector<Impl> Impls() {
  std::vector<Impl> impls = {{"dispatch", Crc32cExtend}, {"portable", internal::Crc32cExtendPortable}};
  if (internal::Crc32cHardwareAvailable()) impls.push_back({"hardware", internal::Crc32cExtendHardware});
  return impls;
}

std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// byte i = (31 i + 7) mod 256: long enough for every code path (unaligned
// head, 8-byte body, tail).
std::string Pattern(std::size_t n) {
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<char>((i * 31 + 7) & 0xff);
  return out;
}

TEST(Crc32c, MatchesRfc3720Vectors) {
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  for (int i = 31; i >= 0; --i) descending.push_back(static_cast<char>(i));
  // RFC 3720 B.4: an iSCSI SCSI Read (10) command PDU.
  const std::string pdu =
      Bytes({0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
             0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
             0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
  for (const Impl& impl : Impls()) {
    auto crc = [&](const std::string& s) { return impl.extend(0, s.data(), s.size()); };
    EXPECT_EQ(crc(std::string(32, '\0')), 0x8A9136AAu) << impl.name;
    EXPECT_EQ(crc(std::string(32, '\xff')), 0x62A8AB43u) << impl.name;
    EXPECT_EQ(crc(ascending), 0x46DD794Eu) << impl.name;
    EXPECT_EQ(crc(descending), 0x113FDB5Cu) << impl.name;
    EXPECT_EQ(crc(pdu), 0xD9963A56u) << impl.name;
    // The catalogue's check value, and two small ones from the Python model.
    EXPECT_EQ(crc("123456789"), 0xE3069283u) << impl.name;
    EXPECT_EQ(crc(""), 0u) << impl.name;
    EXPECT_EQ(crc("a"), 0xC1D04330u) << impl.name;
    EXPECT_EQ(crc(Pattern(4099)), 0xFF4CFF21u) << impl.name;
  }
}

TEST(Crc32c, ExtendInPiecesEqualsOneShot) {
  const std::string data = Pattern(4099);
  for (const Impl& impl : Impls()) {
    // Every split point of a short prefix, and uneven pieces of the whole,
    // starting at every alignment.
    const std::string head = data.substr(0, 37);
    const uint32_t whole_head = impl.extend(0, head.data(), head.size());
    for (std::size_t cut = 0; cut <= head.size(); ++cut) {
      uint32_t crc = impl.extend(0, head.data(), cut);
      crc = impl.extend(crc, head.data() + cut, head.size() - cut);
      EXPECT_EQ(crc, whole_head) << impl.name << " cut " << cut;
    }
    uint32_t crc = 0;
    std::size_t at = 0;
    for (std::size_t piece = 1; at < data.size(); piece = piece * 3 + 1) {
      const std::size_t n = std::min(piece, data.size() - at);
      crc = impl.extend(crc, data.data() + at, n);
      at += n;
    }
    EXPECT_EQ(crc, 0xFF4CFF21u) << impl.name;
  }
  EXPECT_EQ(Crc32c(data), 0xFF4CFF21u);
  EXPECT_EQ(Crc32c(data.data(), data.size()), 0xFF4CFF21u);
}

TEST(Crc32c, MaskIsRotateAndOffset) {
  // By hand: rotate right by 15, add 0xa282ead8.
  EXPECT_EQ(Crc32cMask(0), 0xA282EAD8u);
  EXPECT_EQ(Crc32cMask(0xE3069283u), 0xC78AB0E5u);
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x80000000u, 0x12345678u}) {
    EXPECT_EQ(Crc32cUnmask(Crc32cMask(c)), c);
    EXPECT_NE(Crc32cMask(c), c);
  }
}

}  // namespace
}  // namespace weft
