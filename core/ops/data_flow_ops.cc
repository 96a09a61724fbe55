// Queues: resources holding tuples of tensors between steps, to feed input
// pipelines and coordinate concurrent steps (TensorFlow's queue ops). The
// runtime implements them for every device (core/runtime/kernels/queue_kernels.cc);
// the elements live in host memory. Stacks: per-step resources that save a
// loop's forward values by iteration (core/runtime/kernels/stack_kernels.cc).
// Gradient accumulators and step tokens: synchronous training on parameter
// servers (core/runtime/accumulator.h).
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// FIFOQueue, RandomShuffleQueue: a handle; the component list checked.
Status QueueShape(InferenceContext& c) {
  const auto& types = c.Get("component_types").get<std::vector<DType>>();
  const auto& shapes = c.Get("shapes").get<std::vector<Shape>>();
  if (types.empty()) return c.Error("component_types is empty; a queue element needs at least one component");
  if (!shapes.empty() && shapes.size() != types.size()) {
    return c.Error("shapes has ", shapes.size(), " entries but component_types has ", types.size(),
                   "; give one shape per component, or none");
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i].IsFullyDefined()) {
      return c.Error("shapes[", i, "] is ", shapes[i].ToString(), "; queue shapes must be fully defined");
    }
  }
  const int64_t capacity = c.Int("capacity");
  if (capacity == 0 || capacity < -1) return c.Error("capacity is ", capacity, "; it must be >= 1, or -1 for no limit");
  c.set_output(0, Shape{});
  return Status();
}

// QueueEnqueueMany: every component has the same leading dimension.
Status EnqueueManyShape(InferenceContext& c) {
  int64_t n = Shape::kUnknownDim;
  for (int i = 1; i < c.num_inputs(); ++i) {
    const Shape& s = c.input_shape(i);
    if (s.unknown_rank()) continue;
    if (s.rank() == 0) return c.Error("component ", i - 1, " is a scalar; enqueueing many needs a leading dimension");
    if (s.dim(0) == Shape::kUnknownDim) continue;
    if (n != Shape::kUnknownDim && s.dim(0) != n) {
      return c.Error("the components hold different numbers of elements (", n, " and ", s.dim(0), ")");
    }
    n = s.dim(0);
  }
  return Status();
}

// QueueDequeueMany: [n, ?...] per component; the queue's element shapes
// are known only when it runs.
Status DequeueManyShape(InferenceContext& c) {
  const Shape& n = c.input_shape(1);
  if (!n.unknown_rank() && n.rank() != 0) return c.Error("n must be a scalar; got shape ", n.ToString());
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, Shape::UnknownRank());
  return Status();
}

// A handle-taking op's i64 scalar input |i|.
Status ScalarI64Input(InferenceContext& c, int i, const char* what) {
  const Shape& s = c.input_shape(i);
  if (!s.unknown_rank() && s.rank() != 0) return c.Error(what, " must be a scalar; got shape ", s.ToString());
  return Status();
}

}  // namespace

Status RegisterDataFlowOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("FIFOQueue")
          .Output("handle: resource")
          .Attr("component_types: list(type)")
          .Attr("shapes: list(shape) = []")
          .Attr("capacity: int = -1")
          .Attr("container: string = ''")
          .Attr("shared_name: string = ''")
          .Stateful()
          .Shape(QueueShape)
          .Doc("A handle to the first-in first-out queue (container, shared_name) on its device, created empty "
               "the first time; shared_name defaults to the node's name. An element has one tensor per entry of "
               "component_types, of the shape given in 'shapes' (or, when 'shapes' is empty, of the shapes of "
               "the first enqueue). It holds at most 'capacity' elements (-1: no limit).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("RandomShuffleQueue")
          .Output("handle: resource")
          .Attr("component_types: list(type)")
          .Attr("shapes: list(shape) = []")
          .Attr("capacity: int = -1")
          .Attr("min_after_dequeue: int = 0")
          .Attr("seed: int = 0")
          .Attr("seed2: int = 0")
          .Attr("container: string = ''")
          .Attr("shared_name: string = ''")
          .Stateful()
          .Shape(QueueShape)
          .Doc("Like FIFOQueue, but a dequeue takes elements in random order, and keeps at least "
               "'min_after_dequeue' elements in the queue to choose from until it is closed. The order is fixed "
               "by (seed, seed2) and the sequence of operations; both 0 derive the seed from the queue's name.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("QueueEnqueueMany")
          .Input("handle: resource")
          .Input("components: Tcomponents")
          .Attr("Tcomponents: list(type)")
          .Stateful()
          .Shape(EnqueueManyShape)
          .Doc("Splits each component along its first dimension into n elements and adds them to the queue "
               "in order, waiting while it is full (without holding a thread). Component i must have the "
               "queue's dtype i and shape [n] + its element shape. Fails with CANCELLED on a closed queue, and "
               "when the queue is closed with cancel_pending_enqueues while it waits.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("QueueDequeueMany")
          .Input("handle: resource")
          .Input("n: i32")
          .Output("components: component_types")
          .Attr("component_types: list(type)")
          .Stateful()
          .Shape(DequeueManyShape)
          .Doc("Takes n elements from the queue once they are there (waiting without holding a thread) and "
               "stacks each component into a tensor [n, ...]. Once the queue is closed and holds fewer than n "
               "elements it fails with OUT_OF_RANGE, the end-of-data signal, leaving them in the queue.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("QueueClose")
                     .Input("handle: resource")
                     .Attr("cancel_pending_enqueues: bool = false")
                     .Stateful()
                     .Shape(NoOutputShape)
                     .Doc("Closes the queue: later enqueues fail, dequeues drain what is left (see QueueDequeueMany). "
                          "Enqueues already waiting finish, unless cancel_pending_enqueues, which fails them.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("QueueSize")
                                      .Input("handle: resource")
                                      .Output("size: i32")
                                      .Stateful()
                                      .Shape(ScalarShape)
                                      .Doc("The number of elements in the queue now.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Stack")
          .Output("handle: resource")
          .Attr("elem_type: type")
          .Attr("stack_name: string = ''")
          .Stateful()
          .Shape(ScalarShape)
          .Doc("A handle to a new, empty stack of elem_type tensors, made each time the op runs (so once per "
               "step outside a loop). It saves a loop's forward values under their iteration's index for the "
               "loop's gradient (StackPush, StackPop); stack_name names it in messages (default: the node's "
               "name).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("StackPush")
          .Input("handle: resource")
          .Input("index: i64")
          .Input("elem: T")
          .Output("output: T")
          .Attr("T: type")
          .Stateful()
          .Shape([](InferenceContext& c) {
            const Shape& index = c.input_shape(1);
            if (!index.unknown_rank() && index.rank() != 0) {
              return c.Error("index must be a scalar; got shape ", index.ToString());
            }
            c.set_output(0, c.input_shape(2));
            return Status();
          })
          .Doc("Saves elem on the stack under index (the forward iteration's number) and forwards it. elem's "
               "dtype must be the stack's elem_type, and an index is saved once.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("StackPop")
          .Input("handle: resource")
          .Input("index: i64")
          .Output("elem: elem_type")
          .Attr("elem_type: type")
          .Attr("elem_shape: list(shape) = []")
          .Stateful()
          .Shape([](InferenceContext& c) {
            const Shape& index = c.input_shape(1);
            if (!index.unknown_rank() && index.rank() != 0) {
              return c.Error("index must be a scalar; got shape ", index.ToString());
            }
            const auto& elem_shape = c.Get("elem_shape").get<std::vector<Shape>>();
            if (elem_shape.size() > 1) {
              return c.Error("elem_shape holds ", elem_shape.size(), " shapes; give at most one");
            }
            c.set_output(0, elem_shape.empty() ? Shape::UnknownRank() : elem_shape[0]);
            return Status();
          })
          .Doc("Removes and returns the element saved under index: NOT_FOUND, naming the stack and the index, "
               "when there is none. elem_type must be the stack's; elem_shape, when given, is the shape the "
               "graph assumes for it (the shape its StackPush saw).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("GradientAccumulator")
          .Output("handle: resource")
          .Attr("dtype: {f16, bf16, f32, f64}")
          .Attr("shape: shape")
          .Attr("replicas_to_aggregate: int")
          .Attr("variable: string = ''")
          .Attr("create: bool = true")
          .Attr("container: string = ''")
          .Attr("shared_name: string = ''")
          .Stateful()
          .Shape([](InferenceContext& c) {
            const Shape& shape = c.ShapeAttr("shape");
            if (!shape.IsFullyDefined()) {
              return c.Error("shape is ", shape.ToString(), "; an accumulator's shape must be fully defined");
            }
            Status fits = CheckShapeFits(shape, c.Type("dtype"));
            if (!fits.ok()) return c.Error(fits.message());
            if (c.Int("replicas_to_aggregate") < 1) {
              return c.Error("replicas_to_aggregate is ", c.Int("replicas_to_aggregate"), "; it must be >= 1");
            }
            c.set_output(0, Shape{});
            return Status();
          })
          .Doc("A handle to the gradient accumulator (container, shared_name) on its device: it keeps the first "
               "replicas_to_aggregate gradients of 'variable' (dtype, shape) computed at its current step and "
               "drops older and later ones (synchronous training; docs/distributed.md). Created at step 0 the "
               "first time unless create is false, when a missing one is NOT_FOUND naming the variable (a "
               "worker whose model has a variable the chief's lacks). An existing one made with another dtype, "
               "shape or replicas_to_aggregate is an error naming both.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("AccumulatorApplyGradient")
          .Input("handle: resource")
          .Input("local_step: i64")
          .Input("gradient: dtype")
          .Output("accepted: bool")
          .Attr("dtype: {f16, bf16, f32, f64}")
          .Attr("replica: int")
          .Attr("replica_name: string = ''")
          .Stateful()
          .Shape([](InferenceContext& c) {
            Status scalar = ScalarI64Input(c, 1, "local_step");
            if (!scalar.ok()) return scalar;
            c.set_output(0, Shape{});
            return Status();
          })
          .Doc("Offers replica's gradient, computed with the parameters of step local_step. True when it is "
               "kept; false when it is dropped: computed at an older step than the accumulator's, or arriving "
               "after replicas_to_aggregate were kept for its step (late when its step is the one taken last "
               "or the current one, stale when older). A gradient for a later step "
               "(FAILED_PRECONDITION), a second one from the same replica in a step, or one of another shape "
               "is an error naming both sides. replica_name names the replica in messages.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("AccumulatorTakeGradient")
          .Input("handle: resource")
          .Output("average: dtype")
          .Output("aggregated: i64")
          .Output("stale: i64")
          .Output("late: i64")
          .Attr("dtype: {f16, bf16, f32, f64}")
          .Attr("timeout_ms: int = 0")
          .Attr("replica_names: list(string) = []")
          .Stateful()
          .Shape([](InferenceContext& c) {
            if (c.Int("timeout_ms") < 0) return c.Error("timeout_ms is ", c.Int("timeout_ms"), "; it must be >= 0");
            c.set_output(0, c.input_handle_shape(0));
            for (int i = 1; i < 4; ++i) c.set_output(i, Shape{});
            return Status();
          })
          .Doc("Waits (without holding a thread) until replicas_to_aggregate gradients of the current step are "
               "kept, then outputs their mean, summed in ascending replica order (f32 for 16-bit types), and "
               "advances the accumulator to the next step, so that later gradients of this one are dropped. "
               "aggregated is the number averaged; late and stale count the gradients dropped since the "
               "previous take: late, for the step taken last or after N were kept for theirs; stale, for an "
               "older step. After timeout_ms (0: no "
               "limit) fails with DEADLINE_EXCEEDED naming, by replica_names, the replicas that sent nothing.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("AccumulatorSetGlobalStep")
                     .Input("handle: resource")
                     .Input("step: i64")
                     .Stateful()
                     .Shape([](InferenceContext& c) { return ScalarI64Input(c, 1, "step"); })
                     .Doc("Sets the accumulator's current step (at initialisation and after a restore) and drops the "
                          "gradients it kept and its counts.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("StepTokenQueue")
                     .Output("handle: resource")
                     .Attr("container: string = ''")
                     .Attr("shared_name: string = ''")
                     .Stateful()
                     .Shape(ScalarShape)
                     .Doc("A handle to the step token queue (container, shared_name) on its device: it holds the "
                          "latest step the chief released to the workers of a synchronous run (none at first). "
                          "Unlike TensorFlow's token FIFO it never hands out an old step.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("StepTokenPut")
          .Input("handle: resource")
          .Input("step: i64")
          .Attr("reset: bool = false")
          .Stateful()
          .Shape([](InferenceContext& c) { return ScalarI64Input(c, 1, "step"); })
          .Doc("Releases step (and every earlier one) to the waiting StepTokenTakes; a step below the latest "
               "released is ignored. With reset, the released step becomes step exactly and a closed queue "
               "opens again (after a restore).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("StepTokenTake")
          .Input("handle: resource")
          .Input("local_step: i64")
          .Output("step: i64")
          .Attr("timeout_ms: int = 0")
          .Attr("wait_open: bool = false")
          .Stateful()
          .Shape([](InferenceContext& c) {
            if (c.Int("timeout_ms") < 0) return c.Error("timeout_ms is ", c.Int("timeout_ms"), "; it must be >= 0");
            Status scalar = ScalarI64Input(c, 1, "local_step");
            if (!scalar.ok()) return scalar;
            c.set_output(0, Shape{});
            return Status();
          })
          .Doc("Waits (without holding a thread) until a step later than local_step is released, and outputs the "
               "latest released step. On a closed queue with none later, fails with OUT_OF_RANGE, the clean end "
               "of the run (ABORTED when the chief closed it after an error); after timeout_ms (0: no limit), with "
               "DEADLINE_EXCEEDED. With wait_open (a worker's first take), a closed queue is waited on until a "
               "reset opens it, so a queue left closed by an earlier run is not taken for the new one.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("_TestDelay")
          .Input("inputs: T")
          .Output("outputs: T")
          .Attr("T: list(type)")
          .Attr("factor: float = 1.0")
          .Shape([](InferenceContext& c) {
            if (!(c.Float("factor") >= 1.0 && c.Float("factor") <= 1000.0)) {
              return c.Error("factor is ", c.Float("factor"), "; it must be between 1 and 1000");
            }
            for (int i = 0; i < c.num_inputs(); ++i) c.set_output(i, c.input_shape(i));
            return Status();
          })
          .Doc("For tests (a straggler): forwards its inputs once the step has run factor times as long as it "
               "had when they arrived, waiting without holding a thread.")));
  // Collectives among the ranks of a group (core/runtime/collectives.h);
  // kernels in core/runtime/kernels/collective_kernels.cc.
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("CollectiveAllReduce")
          .Input("inputs: N * T")
          .Output("outputs: N * T")
          .Attr("N: int >= 1")
          .Attr("T: {f16, bf16, f32, f64, i32, i64}")
          .Attr("group: string = 'train'")
          .Attr("round: string = 'train'")
          .Attr("order: int >= 0 = 0")
          .Attr("round_size: int >= 1 = 1")
          .Attr("reduction: string = 'sum'")
          .Stateful()
          .Shape([](InferenceContext& c) {
            const std::string& reduction = c.String("reduction");
            if (reduction != "sum" && reduction != "mean" && reduction != "min" && reduction != "max") {
              return c.Error("reduction is '", reduction, "'; it must be 'sum', 'mean', 'min' or 'max'");
            }
            if (reduction == "mean" && (c.Type("T") == DType::kI32 || c.Type("T") == DType::kI64)) {
              return c.Error("reduction 'mean' needs a floating-point type, not ", DTypeName(c.Type("T")));
            }
            if (c.Int("order") >= c.Int("round_size")) {
              return c.Error("order ", c.Int("order"), " is not below round_size ", c.Int("round_size"));
            }
            for (int i = 0; i < c.num_inputs(); ++i) c.set_output(i, c.input_shape(i));
            return Status();
          })
          .Doc("Reduces each input elementwise over the ranks of the collective group `group` (sum, mean, min or "
               "max); every rank gets the result. The N inputs travel as one fused buffer (a gradient bucket). "
               "Every rank issues the ops of one round in `order` (0..round_size-1), whatever order they become "
               "ready in.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("CollectiveBroadcast")
                                      .Input("input: T")
                                      .Output("output: T")
                                      .Attr("T: {f16, bf16, f32, f64, i32, i64, i8, u8}")
                                      .Attr("root: int >= 0 = 0")
                                      .Attr("group: string = 'train'")
                                      .Attr("round: string = 'init'")
                                      .Attr("order: int >= 0 = 0")
                                      .Attr("round_size: int >= 1 = 1")
                                      .Stateful()
                                      .Shape([](InferenceContext& c) {
                                        if (c.Int("order") >= c.Int("round_size")) {
                                          return c.Error("order ", c.Int("order"), " is not below round_size ",
                                                         c.Int("round_size"));
                                        }
                                        c.set_output(0, c.input_shape(0));
                                        return Status();
                                      })
                                      .Doc("Every rank of the group gets rank `root`'s input (the others' "
                                           "inputs give only the shape and type).")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("CollectiveAllGather")
                     .Input("input: T")
                     .Output("output: T")
                     .Attr("T: {f16, bf16, f32, f64, i32, i64, i8, u8}")
                     .Attr("group: string = 'train'")
                     .Attr("round: string = 'train'")
                     .Attr("order: int >= 0 = 0")
                     .Attr("round_size: int >= 1 = 1")
                     .Stateful()
                     .Shape([](InferenceContext& c) {
                       if (c.Int("order") >= c.Int("round_size")) {
                         return c.Error("order ", c.Int("order"), " is not below round_size ", c.Int("round_size"));
                       }
                       const Shape& in = c.input_shape(0);
                       if (in.unknown_rank()) return Status();
                       if (in.rank() == 0) return c.Error("input must have rank >= 1, got a scalar");
                       std::vector<int64_t> dims = in.dims();
                       dims[0] = Shape::kUnknownDim;  // the group's size times dim 0, known at run time
                       c.set_output(0, Shape(dims));
                       return Status();
                     })
                     .Doc("The ranks' inputs concatenated along dimension 0, in rank order; every rank gets it. Every "
                          "rank's input must have the same shape.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("StepTokenClose")
                                      .Input("handle: resource")
                                      .Attr("aborted: bool = false")
                                      .Stateful()
                                      .Shape(NoOutputShape)
                                      .Doc("Closes the step token queue: takes waiting for a later step end "
                                           "with OUT_OF_RANGE, or with ABORTED when aborted (the chief "
                                           "stopped on an error).")));
  return Status();
}

}  // namespace weft::ops
