// The hip device plugin: AMD GPUs through the HIP runtime (ROCm), with the
// kernels shared with the cuda plugin. The device table is shared with it (gpu_common/); this
// file describes the plugin and lists its kernels. On a machine without an
// AMD GPU or the ROCm kernel driver, device_count answers UNAVAILABLE with the runtime's
// reason and the host lists the plugin as unavailable.
#include "gpu_kernels.h"
#include "gpu_table.h"
#include "weft/sdk/plugin.h"

namespace weft::gpu {
namespace {

const weft_option_def_t kOptions[] = {
    {sizeof(weft_option_def_t), "allocator_cache", WEFT_OPTION_BOOL, "true",
     "Keep freed device buffers in size-bucketed free lists for reuse (released when the device closes).",
     0, 0, 0, 0, nullptr, 0},
};

const weft_plugin_t* Describe() {
  static const weft_plugin_t plugin = [] {
    auto p = sdk::Make<weft_plugin_t>();
    p.abi_major = WEFT_ABI_VERSION_MAJOR;
    p.abi_minor = WEFT_ABI_VERSION_MINOR;
    p.name = "hip";
    p.version = WEFT_GPU_PLUGIN_VERSION;
    p.description = "AMD GPUs: HIP runtime (ROCm)";
    p.kind = WEFT_PLUGIN_DEVICE;
    const KernelRegistry& kernels = Kernels();
    p.device = &DeviceTable(kernels.data(), kernels.size());
    p.options = kOptions;
    p.num_options = sizeof kOptions / sizeof kOptions[0];
    p.configure = Configure;
    return p;
  }();
  return &plugin;
}

}  // namespace
}  // namespace weft::gpu

WEFT_SDK_DEFINE_PLUGIN(weft::gpu::Describe)
