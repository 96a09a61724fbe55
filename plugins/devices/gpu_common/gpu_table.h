// The device table shared by the cuda and hip plugins (gpu_table.cc): the
// runtime's devices, buffers, streams, events and copies behind the C ABI.
#ifndef WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_TABLE_H_
#define WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_TABLE_H_

#include <cstddef>

#include "weft/weft_plugin.h"

namespace weft::gpu {

// Applies the plugin's section: allocator_cache (bool).
weft_status_t Configure(const weft_options_t* options);

// The table, with |kernels| (|num_kernels| entries, static) as its kernel
// list. Built on the first call; later calls return the same table.
const weft_device_plugin_t& DeviceTable(const weft_kernel_def_t* kernels, std::size_t num_kernels);

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_TABLE_H_
