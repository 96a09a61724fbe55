// What differs between the cuda and hip device plugins, declared once and
// defined by each plugin (plugins/devices/cuda/cuda_vendor.cc,
// plugins/devices/hip/hip_vendor.cc): names, the UNAVAILABLE message, extra
// device properties, the kernels only one of them has (cuBLAS, cuDNN), and
// the per-stream library handles those kernels use.
#ifndef WEFT_PLUGINS_DEVICES_GPU_VENDOR_H_
#define WEFT_PLUGINS_DEVICES_GPU_VENDOR_H_

#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_runtime.h"
#include "weft/sdk/kernel.h"

namespace weft::gpu {

class InitContext;
class Context;
using KernelRegistry = sdk::BasicKernelRegistry<InitContext, Context>;

struct VendorInfo {
  // The plugin's name ("cuda") and device type ("CUDA").
  const char* plugin_name;
  const char* device_type;
  // The runtime's name for messages ("CUDA", "HIP") and the prefix of its
  // calls ("cuda", "hip").
  const char* runtime_name;
  const char* call_prefix;
  // Who makes the hardware ("NVIDIA", "AMD").
  const char* hardware_vendor;
  // The plugin's version and its line for `weft plugins`.
  const char* version;
  const char* description;
};

const VendorInfo& Vendor();

// The whole UNAVAILABLE message when |count_error| is what the runtime's
// device count returned (or kSuccess with no devices): the runtime's own
// words, what they mean here, and what to do.
std::string UnavailableMessage(rt::Error count_error);

// The driver and runtime versions, for `weft devices` ("driver CUDA 13.0,
// runtime CUDA 13.0").
std::string DriverText();

// Properties beyond the common ones, for `weft devices`.
std::vector<std::pair<std::string, std::string>> VendorProperties(const rt::DeviceProp& prop);

// Registers the kernels only this vendor's plugin has.
void RegisterVendorKernels(KernelRegistry& r);

// Library handles bound to one stream (cuBLAS and cuDNN for CUDA, none for
// HIP), created on first use; defined by each plugin. Destroying it
// releases them, with the stream's device current.
struct StreamLibraries;
void DestroyStreamLibraries(StreamLibraries* libraries);

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_VENDOR_H_
