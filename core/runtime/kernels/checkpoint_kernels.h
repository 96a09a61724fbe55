// The runtime's kernels for Save and Restore (core/ops/io_ops.cc): they
// move tensors between any device and a checkpoint bundle through host
// memory, so every device has them.
#ifndef WEFT_CORE_RUNTIME_CHECKPOINT_KERNELS_H_
#define WEFT_CORE_RUNTIME_CHECKPOINT_KERNELS_H_

#include <memory>

#include "core/runtime/op_kernel.h"

namespace weft::runtime {

// The kernel of |node|, a Save or a Restore.
Expected<std::unique_ptr<OpKernel>> CreateCheckpointKernel(const Graph::Node& node);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_CHECKPOINT_KERNELS_H_
