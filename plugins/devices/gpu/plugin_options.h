// The [devices.cuda] / [devices.hip] keys and the plugin's description,
// declared alike by the plugin and by its front (gpu_front.cc), so a config
// is validated the same whether a GPU is present or not.
#ifndef WEFT_PLUGINS_DEVICES_GPU_PLUGIN_OPTIONS_H_
#define WEFT_PLUGINS_DEVICES_GPU_PLUGIN_OPTIONS_H_

#include <cstddef>

#include "gpu/vendor.h"
#include "weft/sdk/option_defs.h"
#include "weft/sdk/plugin.h"
#include "weft/sdk/struct.h"
#include "weft/weft_plugin.h"

namespace weft::gpu {

inline constexpr weft_option_def_t kOptions[] = {
    sdk::BoolOption("allocator_cache", "true",
                    "Keep freed device buffers in per-size free lists for reuse (the runtime's own free waits for the "
                    "whole device); false returns every buffer to the runtime at once."),
};

// The plugin's description with the vendor's names and the options above,
// around |table| and |configure|.
inline weft_plugin_t Description(const weft_device_plugin_t* table, weft_status_t (*configure)(const weft_options_t*)) {
  return sdk::DescribePlugin(Vendor().plugin_name, Vendor().version, Vendor().description, table, kOptions, configure);
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_PLUGIN_OPTIONS_H_
