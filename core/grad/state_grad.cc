// Gradients through variables: what flows into a variable's reads is its
// gradient (dense, of the variable's shape).
#include "core/grad/gradients.h"

namespace weft::grad {

void RegisterStateGradients(GradRegistry& r) {
  r.Register("ReadVariable", [](GradContext& c, std::vector<Output>& dx) {
    dx[0] = c.grad(0);
    return Status();
  });
  r.Register("ResourceGather", [](GradContext& c, std::vector<Output>& dx) {
    // The gathered rows' gradients added into a dense [rows, ...] tensor.
    const Output handle = c.input(0);
    const auto& handle_shapes = c.b().node_types(handle.node()).output_handle_shapes;
    const Shape& shape = handle_shapes[static_cast<std::size_t>(handle.index())];
    Output rows;
    if (!shape.unknown_rank() && shape.rank() > 0 && shape.dim(0) >= 0) {
      rows = c.b().Const(Tensor::Scalar<int64_t>(shape.dim(0)));
    } else {
      Output value = c.Op("ReadVariable", {handle}, {{"dtype", c.attr("dtype")}});
      rows = c.Op("Gather", {c.Op("Shape", {value}, {{"out_type", AttrValue(DType::kI64)}}),
                             c.b().Const(Tensor::Scalar<int64_t>(0))});
    }
    dx[0] = c.Op("UnsortedSegmentSum", {c.grad(0), c.input(1), rows});
    return Status();
  });
  r.NotDifferentiable("VarIsInitialized");
  // Checkpoint I/O: values read from a file have no inputs to flow back to.
  r.NotDifferentiable("Save");
  r.NotDifferentiable("SaveShard");
  r.NotDifferentiable("Restore");
  // Queues move data between steps; no gradient flows through them.
  r.NotDifferentiable("QueueDequeueMany");
  r.NotDifferentiable("QueueSize");
  // Stacks save forward values for a loop's gradient, which the gradient
  // builder wires itself; no gradient flows through the stack ops.
  r.NotDifferentiable("Stack");
  r.NotDifferentiable("StackPush");
  r.NotDifferentiable("StackPop");
  // Synchronous training's accumulators and step tokens move gradients and
  // steps between tasks; the training graph wires them itself.
  for (const char* op :
       {"GradientAccumulator", "AccumulatorApplyGradient", "AccumulatorTakeGradient", "AccumulatorSetGlobalStep",
        "StepTokenQueue", "StepTokenPut", "StepTokenTake", "StepTokenClose", "_TestDelay", "CollectiveAllReduce",
        "CollectiveBroadcast", "CollectiveAllGather"}) {
    r.NotDifferentiable(op);
  }
}

}  // namespace weft::grad
