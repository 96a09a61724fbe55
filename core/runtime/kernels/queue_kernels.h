// The runtime's kernels of the queue ops (core/ops/data_flow_ops.cc):
// FIFOQueue, RandomShuffleQueue, QueueEnqueueMany, QueueDequeueMany,
// QueueClose and QueueSize. They keep elements in host memory and so run
// on every device; enqueue and dequeue are async kernels that wait without
// holding a thread.
#ifndef WEFT_CORE_RUNTIME_QUEUE_KERNELS_H_
#define WEFT_CORE_RUNTIME_QUEUE_KERNELS_H_

#include <memory>
#include <string_view>

#include "core/runtime/op_kernel.h"

namespace weft::runtime {

// Whether |op| is one of the queue ops.
bool IsQueueOp(std::string_view op);

// The kernel of queue op |node| on |device|. For FIFOQueue and
// RandomShuffleQueue this finds or creates the queue in the device's
// resource manager; an existing queue of that name made differently is an
// error naming both.
Expected<std::unique_ptr<OpKernel>> CreateQueueKernel(const Graph::Node& node, const RuntimeDevice& device);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_QUEUE_KERNELS_H_
