// The kernels the runtime runs itself on every device (docs/architecture.md,
// "The path of a tensor", step 10): constants, feeds and fetches, forwarding
// and shape ops, variables, and the table that also names the ops whose
// kernels live in the other files of this folder (checkpoints, Send/Recv,
// control flow, queues, accumulators, collectives, stacks).
#include "core/runtime/kernels/builtin_kernels.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/ops/shape_fns.h"
#include "core/runtime/kernels/accumulator_kernels.h"
#include "core/runtime/kernels/checkpoint_kernels.h"
#include "core/runtime/kernels/collective_kernels.h"
#include "core/runtime/kernels/queue_kernels.h"
#include "core/runtime/kernels/send_recv_kernels.h"
#include "core/runtime/kernels/stack_kernels.h"

namespace weft::runtime {
namespace {

class PlaceholderKernel : public OpKernel {
 public:
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    return InvalidArgumentError("Placeholder '", ctx.node().name(), "' was not fed; give it a value (weft run --feed ",
                                ctx.node().name(), "=FILE.npy, or a feed in Session::Run)");
  }
};

class ArgKernel : public OpKernel {
 public:
  explicit ArgKernel(int64_t index) : index_(static_cast<std::size_t>(index)) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    const Tensor& value = (*ctx.step().args)[index_];
    // A feed in host memory for a device that has its own.
    if (value.host_visible() && !ctx.device().host_visible()) {
      WEFT_ASSIGN_OR_RETURN(Tensor moved, ctx.device().CopyFromHost(value));
      ctx.set_output(0, std::move(moved));
      return Status();
    }
    ctx.set_output(0, value);
    return Status();
  }

 private:
  std::size_t index_;
};

class RetvalKernel : public OpKernel {
 public:
  explicit RetvalKernel(int64_t index) : index_(static_cast<std::size_t>(index)) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    (*ctx.step().retvals)[index_] = ctx.input(0);
    return Status();
  }

 private:
  std::size_t index_;
};

class ForwardKernel : public OpKernel {
 public:
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, ctx.input(0));
    return Status();
  }
};

class NoOpKernel : public OpKernel {
 public:
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext&) override { return Status(); }
};

// Reads a small integer tensor (a shape) into host values.
Expected<std::vector<int64_t>> HostInts(const OpKernelContext& ctx, const Tensor& t) {
  WEFT_ASSIGN_OR_RETURN(Tensor host, ctx.device().CopyToHost(t));
  std::vector<int64_t> out;
  for (int64_t i = 0; i < host.num_elements(); ++i) {
    out.push_back(host.dtype() == DType::kI32 ? host.data<int32_t>()[i] : host.data<int64_t>()[i]);
  }
  return out;
}

class ReshapeKernel : public OpKernel {
 public:
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (ctx.input(1).rank() != 1) {
      return InvalidArgumentError("shape must be 1-D, got ", ctx.input(1).shape().ToString());
    }
    WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> target, HostInts(ctx, ctx.input(1)));
    WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                          ops::ResolveReshape(std::move(target), in.num_elements(), in.TypeString()));
    auto out = in.Reshaped(Shape(dims));
    if (!out.ok()) return out.status();
    ctx.set_output(0, *out);
    return Status();
  }
};

class ExpandDimsKernel : public OpKernel {
 public:
  explicit ExpandDimsKernel(int64_t axis) : axis_(axis) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const int rank = in.rank() + 1;
    if (axis_ < -rank || axis_ >= rank) {
      return InvalidArgumentError("axis ", axis_, " is out of range for a result of rank ", rank);
    }
    std::vector<int64_t> dims = in.shape().dims();
    dims.insert(dims.begin() + (axis_ < 0 ? axis_ + rank : axis_), 1);
    WEFT_ASSIGN_OR_RETURN(Tensor out, in.Reshaped(Shape(dims)));
    ctx.set_output(0, out);
    return Status();
  }

 private:
  int64_t axis_;
};

class SqueezeKernel : public OpKernel {
 public:
  explicit SqueezeKernel(std::vector<int64_t> axes) : axes_(std::move(axes)) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    std::vector<bool> drop(static_cast<std::size_t>(in.rank()), false);
    for (int64_t a : axes_) {
      if (a < -in.rank() || a >= in.rank())
        return InvalidArgumentError("axis ", a, " is out of range for ", in.TypeString());
      const int axis = static_cast<int>(a < 0 ? a + in.rank() : a);
      if (in.dim(axis) != 1) {
        return InvalidArgumentError("cannot squeeze axis ", a, " of ", in.TypeString(), ": its size is ", in.dim(axis));
      }
      drop[static_cast<std::size_t>(axis)] = true;
    }
    std::vector<int64_t> dims;
    for (int i = 0; i < in.rank(); ++i) {
      const bool squeeze = axes_.empty() ? in.dim(i) == 1 : drop[static_cast<std::size_t>(i)];
      if (!squeeze) dims.push_back(in.dim(i));
    }
    WEFT_ASSIGN_OR_RETURN(Tensor out, in.Reshaped(Shape(dims)));
    ctx.set_output(0, out);
    return Status();
  }

 private:
  std::vector<int64_t> axes_;
};

// Shape, Size and Rank: computed on the host, placed on the device.
class ShapeInfoKernel : public OpKernel {
 public:
  enum class What { kShape, kSize, kRank };
  ShapeInfoKernel(What what, DType out_type) : what_(what), out_type_(out_type) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    std::vector<int64_t> values;
    Shape shape;
    switch (what_) {
      case What::kShape:
        values = in.shape().dims();
        shape = Shape{static_cast<int64_t>(values.size())};
        break;
      case What::kSize: values = {in.num_elements()}; break;
      case What::kRank: values = {in.rank()}; break;
    }
    WEFT_ASSIGN_OR_RETURN(Tensor host, Tensor::Allocate(out_type_, shape));
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (out_type_ == DType::kI32) {
        if (values[i] > INT32_MAX) {
          return InvalidArgumentError(values[i], " does not fit out_type i32; use out_type i64");
        }
        host.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
      } else {
        host.data<int64_t>()[i] = values[i];
      }
    }
    WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.device().CopyFromHost(host));
    ctx.set_output(0, out);
    return Status();
  }

 private:
  What what_;
  DType out_type_;
};

class ReadVariableKernel : public OpKernel {
 public:
  explicit ReadVariableKernel(DType dtype) : dtype_(dtype) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    Variable* v = HandleVariable(ctx.input(0));
    if (v != nullptr && v->dtype() != dtype_) {
      return InvalidArgumentError("variable ", Quote(v->name()), " holds ", DTypeName(v->dtype()), ", not ",
                                  DTypeName(dtype_));
    }
    WEFT_ASSIGN_OR_RETURN(Tensor * value, ctx.LockVariable(0, false));
    // Shares the buffer; a later in-place update copies first (see
    // LockVariable), so this snapshot never changes.
    ctx.set_output(0, *value);
    return Status();
  }

 private:
  DType dtype_;
};

class AssignKernel : public OpKernel {
 public:
  Status Compute(OpKernelContext& ctx) override {
    Variable* v = HandleVariable(ctx.input(0));
    if (v == nullptr) return InvalidArgumentError("input 0 is not a variable handle");
    const Tensor& value = ctx.input(1);
    if (value.dtype() != v->dtype()) {
      return InvalidArgumentError("variable ", Quote(v->name()), " holds ", DTypeName(v->dtype()),
                                  "; cannot assign a value of dtype ", DTypeName(value.dtype()));
    }
    if (!v->declared_shape().IsCompatibleWith(value.shape())) {
      return InvalidArgumentError("variable ", Quote(v->name()), " is declared ", DTypeName(v->dtype()),
                                  v->declared_shape().ToString(), "; cannot assign a value of shape ",
                                  value.shape().ToString());
    }
    WEFT_ASSIGN_OR_RETURN(Tensor copy, ctx.device().Duplicate(value));
    std::unique_lock<std::shared_mutex> lock(v->mutex());
    v->set_value(std::move(copy));
    return Status();
  }
};

class VarIsInitializedKernel : public OpKernel {
 public:
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    Variable* v = HandleVariable(ctx.input(0));
    if (v == nullptr) return InvalidArgumentError("input 0 is not a variable handle");
    bool initialized;
    {
      std::shared_lock<std::shared_mutex> lock(v->mutex());
      initialized = v->initialized();
    }
    WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.device().CopyFromHost(Tensor::Scalar<bool>(initialized)));
    ctx.set_output(0, out);
    return Status();
  }
};

// The executor runs the control-flow primitives itself (frames, dead
// values); this kernel only stands in for them.
class ControlFlowKernel : public OpKernel {
 public:
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    return InternalError(ctx.node().op_name(), " is run by the executor, not as a kernel");
  }
};

const AttrValue& Attr(const Graph::Node& node, const char* name) { return node.def.attrs.find(name)->second; }

template <class K>
KernelPtr Make(const Graph::Node&, const RuntimeDevice&) {
  return std::unique_ptr<OpKernel>(new K());
}
#if !defined(WEFT_LITE)
// The lite build (docs/lite.md) runs inference graphs: no queues,
// accumulators, collectives, stacks (loop gradients) or checkpoints.
KernelPtr MakeQueue(const Graph::Node& node, const RuntimeDevice& device) { return CreateQueueKernel(node, device); }
KernelPtr MakeAccumulator(const Graph::Node& node, const RuntimeDevice& device) {
  return CreateAccumulatorKernel(node, device);
}
KernelPtr MakeCollective(const Graph::Node& node, const RuntimeDevice& device) {
  return CreateCollectiveKernel(node, device);
}
KernelPtr MakeStack(const Graph::Node& node, const RuntimeDevice&) { return CreateStackKernel(node); }
KernelPtr MakeCheckpoint(const Graph::Node& node, const RuntimeDevice&) { return CreateCheckpointKernel(node); }
#endif
KernelPtr MakeSendRecv(const Graph::Node& node, const RuntimeDevice& device) {
  return CreateSendRecvKernel(node, device);
}
KernelPtr MakeShapeInfo(const Graph::Node& node, const RuntimeDevice&) {
  const std::string& op = node.op_name();
  if (op == "Rank") return std::unique_ptr<OpKernel>(new ShapeInfoKernel(ShapeInfoKernel::What::kRank, DType::kI32));
  return std::unique_ptr<OpKernel>(
      new ShapeInfoKernel(op == "Shape" ? ShapeInfoKernel::What::kShape : ShapeInfoKernel::What::kSize,
                          Attr(node, "out_type").get<DType>()));
}

}  // namespace

// Every op the runtime runs itself, with what makes its kernel: the one
// list (IsRuntimeOp and RuntimeOps read it, so it cannot fall out of step
// with kernel creation).
const std::map<std::string, RuntimeFactory, std::less<>>& RuntimeKernels() {
  static const std::map<std::string, RuntimeFactory, std::less<>> table = {
    {"Const",
     [](const Graph::Node& node, const RuntimeDevice& device) -> KernelPtr {
       const Tensor& value = Attr(node, "value").get<Tensor>();
       // A device that reads host memory (the CPU) reads the graph's own
       // buffer, as it reads a feed: no second copy of every weight when a
       // session is made. The kernel keeps a reference, so no kernel ever
       // takes the buffer over to write it.
       if (device.host_visible() && value.host_visible()) {
         return std::unique_ptr<OpKernel>(new ConstantKernel(value));
       }
       WEFT_ASSIGN_OR_RETURN(Tensor copy, device.CopyFromHost(value));
       return std::unique_ptr<OpKernel>(new ConstantKernel(std::move(copy)));
     }},
    {"Placeholder", Make<PlaceholderKernel>},
    {"_Arg",
     [](const Graph::Node& node, const RuntimeDevice&) -> KernelPtr {
       return std::unique_ptr<OpKernel>(new ArgKernel(Attr(node, "index").get<int64_t>()));
     }},
    {"_Retval",
     [](const Graph::Node& node, const RuntimeDevice&) -> KernelPtr {
       return std::unique_ptr<OpKernel>(new RetvalKernel(Attr(node, "index").get<int64_t>()));
     }},
    {"Identity", Make<ForwardKernel>},
    {"StopGradient", Make<ForwardKernel>},
    {"NoOp", Make<NoOpKernel>},
    {"Reshape", Make<ReshapeKernel>},
    {"ExpandDims",
     [](const Graph::Node& node, const RuntimeDevice&) -> KernelPtr {
       return std::unique_ptr<OpKernel>(new ExpandDimsKernel(Attr(node, "axis").get<int64_t>()));
     }},
    {"Squeeze",
     [](const Graph::Node& node, const RuntimeDevice&) -> KernelPtr {
       return std::unique_ptr<OpKernel>(new SqueezeKernel(Attr(node, "axis").get<std::vector<int64_t>>()));
     }},
    {"Shape", MakeShapeInfo},
    {"Size", MakeShapeInfo},
    {"Rank", MakeShapeInfo},
    {"VarHandle",
     [](const Graph::Node& node, const RuntimeDevice& device) -> KernelPtr {
       std::string name = Attr(node, "shared_name").get<std::string>();
       if (name.empty()) name = node.name();
       WEFT_ASSIGN_OR_RETURN(auto variable, device.resources().LookupOrCreate(
                                                Attr(node, "container").get<std::string>(), name,
                                                Attr(node, "dtype").get<DType>(), Attr(node, "shape").get<Shape>()));
       return std::unique_ptr<OpKernel>(new ConstantKernel(MakeResourceHandle(std::move(variable))));
     }},
    {"ReadVariable",
     [](const Graph::Node& node, const RuntimeDevice&) -> KernelPtr {
       return std::unique_ptr<OpKernel>(new ReadVariableKernel(Attr(node, "dtype").get<DType>()));
     }},
    {"Assign", Make<AssignKernel>},
    {"VarIsInitialized", Make<VarIsInitializedKernel>},
#if !defined(WEFT_LITE)
    // checkpoint_kernels.cc
    {"Save", MakeCheckpoint},
    {"SaveShard", MakeCheckpoint},
    {"Restore", MakeCheckpoint},
#endif
    // send_recv: the edges a partition cut
    {"_Send", MakeSendRecv},
    {"_Recv", MakeSendRecv},
    // the control-flow primitives, run by the executor itself
    {"Enter", Make<ControlFlowKernel>},
    {"Exit", Make<ControlFlowKernel>},
    {"LoopCond", Make<ControlFlowKernel>},
    {"Merge", Make<ControlFlowKernel>},
    {"NextIteration", Make<ControlFlowKernel>},
    {"Switch", Make<ControlFlowKernel>},
#if !defined(WEFT_LITE)
    // queue_kernels.cc
    {"FIFOQueue", MakeQueue},
    {"RandomShuffleQueue", MakeQueue},
    {"QueueClose", MakeQueue},
    {"QueueDequeueMany", MakeQueue},
    {"QueueEnqueueMany", MakeQueue},
    {"QueueSize", MakeQueue},
    // accumulator_kernels.cc
    {"GradientAccumulator", MakeAccumulator},
    {"AccumulatorApplyGradient", MakeAccumulator},
    {"AccumulatorTakeGradient", MakeAccumulator},
    {"AccumulatorSetGlobalStep", MakeAccumulator},
    {"StepTokenQueue", MakeAccumulator},
    {"StepTokenPut", MakeAccumulator},
    {"StepTokenTake", MakeAccumulator},
    {"StepTokenClose", MakeAccumulator},
    {"_TestDelay", MakeAccumulator},
    // collective_kernels.cc
    {"CollectiveAllReduce", MakeCollective},
    {"CollectiveBroadcast", MakeCollective},
    {"CollectiveAllGather", MakeCollective},
    // stack_kernels.cc
    {"Stack", MakeStack},
    {"StackPop", MakeStack},
    {"StackPush", MakeStack},
#endif
  };
  return table;
}

KernelPtr CreateRuntimeKernel(const Graph::Node& node, const RuntimeDevice& device) {
  const auto& table = RuntimeKernels();
  auto it = table.find(node.op_name());
  if (it == table.end()) return InternalError("no runtime kernel for ", node.op_name());
  return it->second(node, device);
}

}  // namespace weft::runtime
