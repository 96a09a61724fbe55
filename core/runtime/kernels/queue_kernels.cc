#include "core/runtime/kernels/queue_kernels.h"

#include <algorithm>
#include <array>

#include "core/runtime/queue.h"

namespace weft::runtime {
namespace {

const AttrValue& Attr(const Graph::Node& node, const char* name) { return node.def.attrs.find(name)->second; }

std::string TypesText(const std::vector<DType>& types) {
  std::vector<std::string> names;
  for (DType d : types) names.emplace_back(DTypeName(d));
  return StrCat("[", StrJoin(names, ", "), "]");
}

// The queue behind resource input 0.
Expected<Queue*> InputQueue(const OpKernelContext& ctx) {
  Resource* resource = HandleResource(ctx.input(0));
  if (resource == nullptr) return InvalidArgumentError("input 0 is not a resource handle");
  auto* queue = dynamic_cast<Queue*>(resource);
  if (queue == nullptr) {
    return InvalidArgumentError("input 0 is a handle to the ", resource->kind(), " '", resource->name(), "'",
                                ", not to a queue");
  }
  return queue;
}

class EnqueueManyKernel : public OpKernel {
 public:
  bool IsAsync() const override { return true; }
  Status Compute(OpKernelContext&) override { return InternalError("QueueEnqueueMany runs asynchronously"); }
  void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) override {
    auto queue = InputQueue(ctx);
    if (!queue.ok()) return done(queue.status());
    std::vector<Tensor> components;
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      auto host = ctx.device().CopyToHost(ctx.input(i));
      if (!host.ok()) return done(host.status());
      components.push_back(std::move(*host));
    }
    (*queue)->EnqueueMany(std::move(components), &ctx.step().cancellation, std::move(done));
  }
};

// Stacks |elements| into the outputs of |ctx|.
Status SetDequeued(OpKernelContext& ctx, const Queue& queue, const std::vector<Queue::Element>& elements) {
  const std::vector<Shape> shapes = elements.empty() ? queue.ElementShapes() : std::vector<Shape>{};
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const auto c = static_cast<std::size_t>(i);
    std::vector<int64_t> dims = {static_cast<int64_t>(elements.size())};
    const Shape& element = elements.empty() ? shapes[c] : elements[0][c].shape();
    if (!element.unknown_rank()) dims.insert(dims.end(), element.dims().begin(), element.dims().end());
    if (ctx.device().host_visible()) {
      WEFT_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(i, Shape(dims)));
      Queue::Stack(elements, c, *out);
    } else {
      WEFT_ASSIGN_OR_RETURN(Tensor host, Tensor::Allocate(queue.spec().component_types[c], Shape(dims)));
      Queue::Stack(elements, c, host);
      WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.device().CopyFromHost(host));
      ctx.set_output(i, std::move(out));
    }
  }
  return Status();
}

class DequeueManyKernel : public OpKernel {
 public:
  explicit DequeueManyKernel(std::vector<DType> types) : types_(std::move(types)) {}
  bool IsAsync() const override { return true; }
  Status Compute(OpKernelContext&) override { return InternalError("QueueDequeueMany runs asynchronously"); }
  void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) override {
    auto queue = InputQueue(ctx);
    if (!queue.ok()) return done(queue.status());
    Queue* q = *queue;
    if (q->spec().component_types != types_) {
      return done(InvalidArgumentError("this node dequeues ", TypesText(types_), " but queue '", q->name(), "'",
                                       " holds ", TypesText(q->spec().component_types)));
    }
    auto n = ctx.device().CopyToHost(ctx.input(1));
    if (!n.ok()) return done(n.status());
    if (n->rank() != 0) return done(InvalidArgumentError("n must be a scalar; got ", n->TypeString()));
    OpKernelContext* c = &ctx;
    // |ctx| and the handle input (which keeps |q| alive) last until |done|.
    q->DequeueMany(n->scalar<int32_t>(), &ctx.step().cancellation,
                   [c, q, done = std::move(done)](Status status, std::vector<Queue::Element> elements) {
                     if (status.ok()) status = SetDequeued(*c, *q, elements);
                     done(status);
                   });
  }

 private:
  std::vector<DType> types_;
};

class CloseKernel : public OpKernel {
 public:
  explicit CloseKernel(bool cancel_pending_enqueues) : cancel_(cancel_pending_enqueues) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(Queue * queue, InputQueue(ctx));
    queue->Close(cancel_);
    return Status();
  }

 private:
  bool cancel_;
};

class SizeKernel : public OpKernel {
 public:
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(Queue * queue, InputQueue(ctx));
    const int64_t size = queue->Size();
    WEFT_ASSIGN_OR_RETURN(
        Tensor out,
        ctx.device().CopyFromHost(Tensor::Scalar<int32_t>(static_cast<int32_t>(std::min<int64_t>(size, INT32_MAX)))));
    ctx.set_output(0, std::move(out));
    return Status();
  }
};

QueueSpec SpecOf(const Graph::Node& node) {
  QueueSpec spec;
  spec.component_types = Attr(node, "component_types").get<std::vector<DType>>();
  spec.shapes = Attr(node, "shapes").get<std::vector<Shape>>();
  spec.capacity = Attr(node, "capacity").get<int64_t>();
  return spec;
}

bool SameSpec(const QueueSpec& a, const QueueSpec& b) {
  return a.component_types == b.component_types && a.shapes == b.shapes && a.capacity == b.capacity;
}

Expected<std::unique_ptr<OpKernel>> CreateQueue(const Graph::Node& node, const RuntimeDevice& device) {
  const QueueSpec spec = SpecOf(node);
  WEFT_RETURN_IF_ERROR(ValidateQueueSpec(spec));
  std::string name = Attr(node, "shared_name").get<std::string>();
  if (name.empty()) name = node.name();
  const std::string& container = Attr(node, "container").get<std::string>();
  std::shared_ptr<Queue> queue;
  if (node.op_name() == "FIFOQueue") {
    WEFT_ASSIGN_OR_RETURN(
        queue, device.resources().LookupOrCreate<FIFOQueue>(
                   container, name, "FIFO queue",
                   [&]() -> Expected<std::shared_ptr<FIFOQueue>> { return FIFOQueue::Create(name, spec); },
                   [&](const FIFOQueue& existing) -> Status {
                     if (SameSpec(existing.spec(), spec)) return Status();
                     return InvalidArgumentError("FIFO queue '", name, "' exists with ", existing.spec().ToString(),
                                                 "; this node asks for ", spec.ToString());
                   }));
  } else {
    const int64_t min_after = Attr(node, "min_after_dequeue").get<int64_t>();
    if (min_after < 0) return InvalidArgumentError("min_after_dequeue is ", min_after, "; it must be >= 0");
    if (spec.capacity >= 0 && min_after >= spec.capacity) {
      return InvalidArgumentError("min_after_dequeue ", min_after, " must be less than the capacity ", spec.capacity,
                                  ", or no dequeue could ever take an element");
    }
    const int64_t seed = Attr(node, "seed").get<int64_t>();
    const int64_t seed2 = Attr(node, "seed2").get<int64_t>();
    WEFT_ASSIGN_OR_RETURN(queue, device.resources().LookupOrCreate<RandomShuffleQueue>(
                                     container, name, "random-shuffle queue",
                                     [&]() -> Expected<std::shared_ptr<RandomShuffleQueue>> {
                                       return RandomShuffleQueue::Create(name, spec, min_after, seed, seed2);
                                     },
                                     [&](const RandomShuffleQueue& existing) -> Status {
                                       if (SameSpec(existing.spec(), spec) && existing.min_after_dequeue() == min_after)
                                         return Status();
                                       return InvalidArgumentError(
                                           "random-shuffle queue '", name, "' exists with ", existing.spec().ToString(),
                                           ", min_after_dequeue ", existing.min_after_dequeue(),
                                           "; this node asks for ", spec.ToString(), ", min_after_dequeue ", min_after);
                                     }));
  }
  return std::unique_ptr<OpKernel>(new ConstantKernel(MakeResourceHandle(std::move(queue))));
}

constexpr std::array<std::string_view, 6> kQueueOps = {"FIFOQueue",        "QueueClose", "QueueDequeueMany",
                                                       "QueueEnqueueMany", "QueueSize",  "RandomShuffleQueue"};

}  // namespace

bool IsQueueOp(std::string_view op) { return std::find(kQueueOps.begin(), kQueueOps.end(), op) != kQueueOps.end(); }

Expected<std::unique_ptr<OpKernel>> CreateQueueKernel(const Graph::Node& node, const RuntimeDevice& device) {
  const std::string& op = node.op_name();
  if (op == "FIFOQueue" || op == "RandomShuffleQueue") return CreateQueue(node, device);
  if (op == "QueueEnqueueMany") return std::unique_ptr<OpKernel>(new EnqueueManyKernel());
  if (op == "QueueDequeueMany") {
    return std::unique_ptr<OpKernel>(new DequeueManyKernel(Attr(node, "component_types").get<std::vector<DType>>()));
  }
  if (op == "QueueClose") {
    return std::unique_ptr<OpKernel>(new CloseKernel(Attr(node, "cancel_pending_enqueues").get<bool>()));
  }
  if (op == "QueueSize") return std::unique_ptr<OpKernel>(new SizeKernel());
  return InternalError("no queue kernel for ", op);
}

}  // namespace weft::runtime
