// libFuzzer target: the ONNX importer (core/onnx) on arbitrary bytes, and the
// exporter on whatever imports. Every outcome must be a Status: ONNX's
// checker and shape inference, the converters, the graph builder.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/onnx/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::onnx_io::ImportOptions options;
  options.freeze = (size % 2) == 0;
  auto model = weft::onnx_io::ImportOnnxBytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.onnx",
                                              "/nonexistent", options);
  if (model.ok() && options.freeze) (void)weft::onnx_io::ExportOnnx(model->def);
  return 0;
}
