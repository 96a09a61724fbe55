#include "core/runtime/kernels/collective_kernels.h"

#include <cstring>

#include "core/runtime/cancellation.h"
#include "core/runtime/collectives.h"
#include "weft/sdk/half.h"

namespace weft::runtime {
namespace {

const AttrValue& Attr(const Graph::Node& node, const char* name) { return node.def.attrs.find(name)->second; }

OrderKey KeyOf(const Graph::Node& node) {
  return OrderKey{Attr(node, "round").get<std::string>(), Attr(node, "order").get<int64_t>(),
                  Attr(node, "round_size").get<int64_t>()};
}

weft_comm_buffer_t BufferOf(DType dtype, int64_t count, void* data) {
  weft_comm_buffer_t b{};
  b.struct_size = sizeof(b);
  b.dtype = static_cast<weft_dtype_t>(dtype);
  b.count = static_cast<uint64_t>(count);
  b.data = data;
  return b;
}

// The group the node names, or why there is none.
Expected<std::shared_ptr<CollectiveGroup>> GroupOf(const OpKernelContext& ctx) {
  const std::string& name = Attr(ctx.node(), "group").get<std::string>();
  std::shared_ptr<CollectiveGroup> group = FindCollectiveGroup(name);
  if (group == nullptr) {
    return FailedPreconditionError("collective group '", name,
                                   "' is not set up in this process (collective ops run under weft train with "
                                   "training.mode = \"allreduce\", or in a program that creates the group first)");
  }
  if (!ctx.device().host_visible()) {
    return UnimplementedError("its tensors are in the memory of ", ctx.device().name(),
                              ", and collectives on device memory are not built yet; place it on a CPU");
  }
  return group;
}

// The kernel's |done|, armed so that a cancelled step (another node of it
// failed) aborts the group: an operation waiting for its turn, or for peers
// that will never send, would otherwise hold the step forever. Null when
// the step is cancelled already (|done| has then been called).
std::function<void(Status)> Arm(OpKernelContext& ctx, const std::shared_ptr<CollectiveGroup>& group,
                                std::function<void(Status)> done) {
  CancellationManager* cancellation = &ctx.step().cancellation;
  const std::string node = ctx.node().name();
  const CancellationManager::Token token = cancellation->Register([group, node] {
    group->Abort(CancelledError("the step was cancelled while collective '", node, "' was pending"));
  });
  if (token == CancellationManager::kInvalidToken) {
    Status cancelled = CancelledError("the step was cancelled before collective '", node, "' started");
    group->Abort(cancelled);
    done(cancelled);
    return nullptr;
  }
  return [cancellation, token, done = std::move(done)](Status status) {
    cancellation->Deregister(token);
    done(std::move(status));
  };
}

// A failure before the operation reached the group: the other ops of the
// round could never complete, so the group is aborted.
void FailBefore(const std::shared_ptr<CollectiveGroup>& group, const std::function<void(Status)>& done,
                const Status& status) {
  group->Abort(status);
  done(status);
}

// Multiplies |count| elements at |data| by |factor| (a mean's 1/size).
void Scale(DType dtype, void* data, int64_t count, double factor) {
  switch (dtype) {
    case DType::kF32: {
      auto* p = static_cast<float*>(data);
      const float f = static_cast<float>(factor);
      for (int64_t i = 0; i < count; ++i) p[i] *= f;
      break;
    }
    case DType::kF64: {
      auto* p = static_cast<double*>(data);
      for (int64_t i = 0; i < count; ++i) p[i] *= factor;
      break;
    }
    case DType::kF16: {
      auto* p = static_cast<uint16_t*>(data);
      const float f = static_cast<float>(factor);
      for (int64_t i = 0; i < count; ++i) p[i] = sdk::FloatToHalf(sdk::HalfToFloat(p[i]) * f);
      break;
    }
    case DType::kBF16: {
      auto* p = static_cast<uint16_t*>(data);
      const float f = static_cast<float>(factor);
      for (int64_t i = 0; i < count; ++i) p[i] = sdk::FloatToBfloat16(sdk::Bfloat16ToFloat(p[i]) * f);
      break;
    }
    default: break;  // the op refuses mean for integers
  }
}

constexpr uint64_t kSlotAlign = 64;
uint64_t AlignUp(uint64_t n) { return (n + kSlotAlign - 1) / kSlotAlign * kSlotAlign; }

// N inputs of one type travel as one fused buffer: each input copied into
// its 64-byte aligned slot, reduced in place, and the outputs are views of
// the slots (no copy back).
class AllReduceKernel : public OpKernel {
 public:
  AllReduceKernel(OrderKey key, std::string reduction) : key_(std::move(key)), reduction_(std::move(reduction)) {}
  bool IsAsync() const override { return true; }
  Status Compute(OpKernelContext&) override { return InternalError("CollectiveAllReduce runs asynchronously"); }
  void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) override {
    auto group = GroupOf(ctx);
    if (!group.ok()) return done(group.status());
    done = Arm(ctx, *group, std::move(done));
    if (!done) return;
    const DType dtype = ctx.node().def.attrs.find("T")->second.get<DType>();
    const int n = ctx.num_inputs();
    std::vector<uint64_t> offsets(static_cast<std::size_t>(n));
    uint64_t total = 0;
    int64_t elements = 0;
    for (int i = 0; i < n; ++i) {
      offsets[static_cast<std::size_t>(i)] = total;
      total += AlignUp(ctx.input(i).byte_size());
    }
    auto buffer = HostBuffer::Allocate(total);
    if (!buffer.ok()) return FailBefore(*group, done, buffer.status());
    char* base = static_cast<char*>((*buffer)->data());
    for (int i = 0; i < n; ++i) {
      const Tensor& in = ctx.input(i);
      char* slot = base + offsets[static_cast<std::size_t>(i)];
      if (in.byte_size() > 0) std::memcpy(slot, in.raw_data(), in.byte_size());
      // Padding is reduced too; zeros keep it finite.
      const uint64_t pad = AlignUp(in.byte_size()) - in.byte_size();
      if (pad > 0) std::memset(slot + in.byte_size(), 0, pad);
      ctx.set_output(i, Tensor(dtype, in.shape(), *buffer, offsets[static_cast<std::size_t>(i)]));
    }
    elements = static_cast<int64_t>(total / DTypeSize(dtype));
    const weft_reduction_t reduction = reduction_ == "min"   ? WEFT_REDUCE_MIN
                                       : reduction_ == "max" ? WEFT_REDUCE_MAX
                                                             : WEFT_REDUCE_SUM;
    const double factor = reduction_ == "mean" ? 1.0 / (*group)->options().size : 1.0;
    const weft_comm_buffer_t b = BufferOf(dtype, elements, base);
    std::shared_ptr<HostBuffer> keep = *buffer;
    (*group)->AllReduce(key_, b, b, reduction, [done = std::move(done), keep, dtype, elements, factor](Status status) {
      if (!status.ok()) return done(status);
      if (factor != 1.0) Scale(dtype, keep->data(), elements, factor);
      done(Status());
    });
  }

 private:
  OrderKey key_;
  std::string reduction_;
};

class BroadcastKernel : public OpKernel {
 public:
  BroadcastKernel(OrderKey key, int root) : key_(std::move(key)), root_(root) {}
  bool IsAsync() const override { return true; }
  Status Compute(OpKernelContext&) override { return InternalError("CollectiveBroadcast runs asynchronously"); }
  void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) override {
    auto group = GroupOf(ctx);
    if (!group.ok()) return done(group.status());
    done = Arm(ctx, *group, std::move(done));
    if (!done) return;
    if (root_ >= (*group)->options().size) {
      return FailBefore(*group, done,
                        InvalidArgumentError("root ", root_, " is not a rank of group '", (*group)->options().name,
                                             "' (", (*group)->options().size, " ranks)"));
    }
    const Tensor& in = ctx.input(0);
    auto out = Tensor::Allocate(in.dtype(), in.shape());
    if (!out.ok()) return FailBefore(*group, done, out.status());
    if (in.byte_size() > 0) std::memcpy(out->raw_data(), in.raw_data(), in.byte_size());
    ctx.set_output(0, *out);
    (*group)->Broadcast(key_, BufferOf(in.dtype(), in.num_elements(), out->raw_data()), root_,
                        [done = std::move(done), keep = *out](Status status) {
                          if (!status.ok()) return done(status);
                          done(Status());
                        });
  }

 private:
  OrderKey key_;
  int root_;
};

class AllGatherKernel : public OpKernel {
 public:
  explicit AllGatherKernel(OrderKey key) : key_(std::move(key)) {}
  bool IsAsync() const override { return true; }
  Status Compute(OpKernelContext&) override { return InternalError("CollectiveAllGather runs asynchronously"); }
  void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) override {
    auto group = GroupOf(ctx);
    if (!group.ok()) return done(group.status());
    done = Arm(ctx, *group, std::move(done));
    if (!done) return;
    const Tensor& in = ctx.input(0);
    if (in.rank() == 0) return FailBefore(*group, done, InvalidArgumentError("input must have rank >= 1"));
    std::vector<int64_t> dims = in.shape().dims();
    const int size = (*group)->options().size;
    dims[0] *= size;
    auto out = Tensor::Allocate(in.dtype(), Shape(dims));
    if (!out.ok()) return FailBefore(*group, done, out.status());
    ctx.set_output(0, *out);
    (*group)->AllGather(key_, BufferOf(in.dtype(), in.num_elements(), in.raw_data()),
                        BufferOf(in.dtype(), in.num_elements() * size, out->raw_data()),
                        [done = std::move(done), keep_in = in, keep = *out](Status status) {
                          if (!status.ok()) return done(status);
                          done(Status());
                        });
  }

 private:
  OrderKey key_;
};

}  // namespace

Expected<std::unique_ptr<OpKernel>> CreateCollectiveKernel(const Graph::Node& node, const RuntimeDevice&) {
  const std::string& op = node.op_name();
  if (op == "CollectiveAllReduce") {
    return std::unique_ptr<OpKernel>(new AllReduceKernel(KeyOf(node), Attr(node, "reduction").get<std::string>()));
  }
  if (op == "CollectiveBroadcast") {
    return std::unique_ptr<OpKernel>(
        new BroadcastKernel(KeyOf(node), static_cast<int>(Attr(node, "root").get<int64_t>())));
  }
  if (op == "CollectiveAllGather") return std::unique_ptr<OpKernel>(new AllGatherKernel(KeyOf(node)));
  return InternalError("no collective kernel for ", op);
}

}  // namespace weft::runtime
