// libFuzzer target: graph files, binary and text, and the validation that
// follows loading. Nothing in a file may crash, hang or exhaust memory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/graph/graph.h"
#include "core/graph/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (weft::GraphFormat format : {weft::GraphFormat::kBinary, weft::GraphFormat::kText}) {
    auto def = weft::ParseGraphDef(bytes, format, "fuzz");
    if (def.ok()) {
      auto graph = weft::Graph::FromGraphDef(std::move(*def));
      (void)graph.ok();
    }
  }
  return 0;
}
