// libFuzzer target: the TOML configuration loader.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config =
      weft::config::ParseConfig(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml", "/");
  (void)config.ok();
  return 0;
}
