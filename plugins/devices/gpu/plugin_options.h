// The [devices.cuda] / [devices.hip] keys, declared alike by the plugin and
// by its front (gpu_front.cc), so a config is validated the same whether a
// GPU is present or not.
#ifndef WEFT_PLUGINS_DEVICES_GPU_PLUGIN_OPTIONS_H_
#define WEFT_PLUGINS_DEVICES_GPU_PLUGIN_OPTIONS_H_

#include <cstddef>

#include "weft/weft_plugin.h"

namespace weft::gpu {

inline const weft_option_def_t kOptions[] = {
    {sizeof(weft_option_def_t), "allocator_cache", WEFT_OPTION_BOOL, "true",
     "Keep freed device buffers in per-size free lists for reuse (the runtime's own free waits for the whole "
     "device); false returns every buffer to the runtime at once.",
     0, 0, 0, 0, nullptr, 0},
};
inline constexpr std::size_t kNumOptions = sizeof kOptions / sizeof kOptions[0];

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_PLUGIN_OPTIONS_H_
