// libFuzzer target: the IDX reader, gzip-compressed or not (the path
// ReadIdx takes), and the CSV parser on the same bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/data/readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    auto inflated = weft::data::Gunzip(bytes, "fuzz.gz");
    if (inflated.ok()) (void)weft::data::ParseIdx(*inflated, "fuzz.gz");
  } else {
    (void)weft::data::ParseIdx(bytes, "fuzz.idx");
  }
  (void)weft::data::ParseCsv(bytes, "fuzz.csv", -1);
  return 0;
}
