// Queues: resources holding tuples of tensors between steps, to feed input
// pipelines and coordinate concurrent steps (TensorFlow's queue ops). The
// runtime implements them for every device (core/runtime/queue_kernels.cc);
// the elements live in host memory. Stacks: per-step resources that save a
// loop's forward values by iteration (core/runtime/stack_kernels.cc).
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
  return Status();
}

}  // namespace weft::ops
