// libFuzzer target: the .npy reader.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/tensor/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensor = weft::ParseNpy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (tensor.ok()) (void)weft::SerializeNpy(*tensor);
  return 0;
}
