// What every oneDNN kernel of the CPU plugin shares: one engine, a stream
// per thread, and OpenMP sized to the host's intra-op threads.
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_DNNL_UTIL_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_DNNL_UTIL_H_

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include "weft/sdk/host.h"

namespace weft::cpu {

inline dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

inline dnnl::stream& Stream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

// oneDNN runs on OpenMP, whose thread count belongs to the calling thread:
// every thread that runs a oneDNN kernel sets it to the host's intra-op
// count (again whenever that changes).
inline void UseIntraOpThreads() {
  thread_local int threads = 0;
  const int want = sdk::host()->intra_op_threads();
  if (threads != want) {
    omp_set_num_threads(want);
    threads = want;
  }
}

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_DNNL_UTIL_H_
