// The memory XNNPACK's operators take in the lite build (docs/lite.md):
// the weights they pack and their indirection buffers, from regions that
// ask the kernel for transparent huge pages (xnn_memory.cc).
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_XNN_MEMORY_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_XNN_MEMORY_H_

#include <xnnpack.h>

#include <cstddef>

namespace weft::cpu {

// At least |size| bytes of zeroed anonymous memory at a 2 MiB boundary,
// advised MADV_HUGEPAGE, or nullptr when it cannot be mapped; |size|
// becomes the mapping's, a multiple of 2 MiB, and munmap(p, size) returns
// it.
void* MapHugePages(std::size_t& size);

// The allocator to give xnn_initialize.
const xnn_allocator* XnnAllocator();

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_XNN_MEMORY_H_
