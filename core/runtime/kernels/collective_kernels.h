// The runtime's kernels of the collective ops (core/ops/data_flow_ops.cc):
// CollectiveAllReduce, CollectiveBroadcast and CollectiveAllGather. They
// find their group by name at run time (core/runtime/collectives.h) and
// complete asynchronously, holding no thread while the plugin works.
#ifndef WEFT_CORE_RUNTIME_COLLECTIVE_KERNELS_H_
#define WEFT_CORE_RUNTIME_COLLECTIVE_KERNELS_H_

#include <memory>

#include "core/runtime/op_kernel.h"

namespace weft::runtime {

Expected<std::unique_ptr<OpKernel>> CreateCollectiveKernel(const Graph::Node& node, const RuntimeDevice& device);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_COLLECTIVE_KERNELS_H_
