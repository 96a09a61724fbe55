// CUDA versions as text, from the runtime alone (cuda_probe.cc).
#ifndef WEFT_PLUGINS_DEVICES_CUDA_CUDA_PROBE_H_
#define WEFT_PLUGINS_DEVICES_CUDA_CUDA_PROBE_H_

#include <string>

namespace weft::gpu {

// "13.0" for 13000: CUDA versions are major * 1000 + minor * 10.
std::string CudaVersion(int version);
// The runtime's version ("13.0"); the one built against when it cannot say.
std::string RuntimeVersion();

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_CUDA_CUDA_PROBE_H_
