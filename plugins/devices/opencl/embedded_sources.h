// The plugin's OpenCL C sources (kernels/*.cl), embedded at build time by
// embed_sources.cmake so that the plugin needs no files at run time.
#ifndef WEFT_PLUGINS_DEVICES_OPENCL_EMBEDDED_SOURCES_H_
#define WEFT_PLUGINS_DEVICES_OPENCL_EMBEDDED_SOURCES_H_

#include <cstddef>

namespace weft::opencl {

struct EmbeddedSource {
  const char* name;  // the file's stem: "elementwise" for elementwise.cl
  const char* text;  // NUL-terminated
  std::size_t size;  // bytes, without the NUL
};

// Defined in the generated embedded_sources.cc.
extern const EmbeddedSource kEmbeddedSources[];
extern const std::size_t kNumEmbeddedSources;

}  // namespace weft::opencl

#endif  // WEFT_PLUGINS_DEVICES_OPENCL_EMBEDDED_SOURCES_H_
