// libFuzzer target: the checkpoint index parser (core/checkpoint/index.h).
// Each input is parsed as it is, and again with the header's body size and
// the trailing checksum made right, so that mutations reach the body
// parser instead of stopping at the checksum. A body that parses must
// serialize back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/base/crc32c.h"
#include "core/checkpoint/index.h"

namespace {

void PutLe(std::string& out, std::size_t at, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + static_cast<std::size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xff);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using weft::checkpoint::kIndexHeaderSize;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto index = weft::checkpoint::ParseIndex(bytes, "fuzz.index");
  if (index.ok()) (void)weft::checkpoint::SerializeIndex(*index);

  if (size < kIndexHeaderSize) return 0;
  std::string fixed(bytes);
  fixed.replace(0, 8, weft::checkpoint::kIndexMagic);
  PutLe(fixed, 8, weft::checkpoint::kBundleFormatVersion, 4);
  PutLe(fixed, 12, 0, 4);
  PutLe(fixed, 16, size - kIndexHeaderSize, 8);
  fixed.append(4, '\0');
  PutLe(fixed, size, weft::Crc32cMask(weft::Crc32c(fixed.data(), size)), 4);
  auto parsed = weft::checkpoint::ParseIndex(fixed, "fuzz.index");
  if (parsed.ok() && weft::checkpoint::SerializeIndex(*parsed) != fixed) std::abort();
  return 0;
}
