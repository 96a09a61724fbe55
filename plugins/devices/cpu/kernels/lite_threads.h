// The lite build's threads (docs/lite.md): one pthreadpool, as many
// threads as the host's intra-op threads, runs both XNNPACK's operators
// (xnn_kernels.cc) and every other kernel's ParallelFor (lite_threads.cc).
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_LITE_THREADS_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_LITE_THREADS_H_

#include <pthreadpool.h>

namespace weft::cpu {

pthreadpool_t LitePool();

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_LITE_THREADS_H_
