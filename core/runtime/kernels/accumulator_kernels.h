// The runtime's kernels of the synchronous-training ops
// (core/ops/data_flow_ops.cc): GradientAccumulator,
// AccumulatorApplyGradient, AccumulatorTakeGradient,
// AccumulatorSetGlobalStep, StepTokenQueue, StepTokenPut, StepTokenTake
// and StepTokenClose. Their resources keep host memory (see
// core/runtime/accumulator.h), so they run on every device; the takes are
// async kernels that wait without holding a thread.
#ifndef WEFT_CORE_RUNTIME_ACCUMULATOR_KERNELS_H_
#define WEFT_CORE_RUNTIME_ACCUMULATOR_KERNELS_H_

#include <memory>
#include <string_view>

#include "core/runtime/op_kernel.h"

namespace weft::runtime {

// Whether |op| is one of the ops above.
bool IsAccumulatorOp(std::string_view op);

// The kernel of |node| on |device|. GradientAccumulator and StepTokenQueue
// find or create their resource in the device's resource manager (an
// existing one made differently is an error naming both); a
// GradientAccumulator with create = false only finds it, and a missing one
// is NOT_FOUND naming the variable.
Expected<std::unique_ptr<OpKernel>> CreateAccumulatorKernel(const Graph::Node& node, const RuntimeDevice& device);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_ACCUMULATOR_KERNELS_H_
