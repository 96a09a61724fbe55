#include "core/runtime/send_recv_kernels.h"

#include "core/plugin/host_services.h"
#include "core/runtime/rendezvous.h"

namespace weft::runtime {
namespace {

RendezvousKey KeyOf(const Graph::Node& node) {
  const AttrMap& a = node.def.attrs;
  return RendezvousKey::Make(a.at("send_device").get<std::string>(),
                             static_cast<uint64_t>(a.at("send_device_incarnation").get<int64_t>()),
                             a.at("recv_device").get<std::string>(), a.at("tensor_name").get<std::string>());
}

Status NoRendezvous(const RendezvousKey& key) {
  return InternalError("tensor ", key.ToString(), " crosses devices, but the step has no rendezvous");
}

class SendKernel : public OpKernel {
 public:
  explicit SendKernel(RendezvousKey key) : key_(std::move(key)) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    Rendezvous* rendezvous = ctx.step().rendezvous;
    if (rendezvous == nullptr) return NoRendezvous(key_);
    return rendezvous->Send(key_, Rendezvous::Item{ctx.input(0), &ctx.device()});
  }

 private:
  RendezvousKey key_;
};

class RecvKernel : public OpKernel {
 public:
  explicit RecvKernel(RendezvousKey key) : key_(std::move(key)) {}
  bool IsAsync() const override { return true; }
  Status Compute(OpKernelContext&) override { return InternalError("_Recv runs asynchronously"); }
  void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) override {
    Rendezvous* rendezvous = ctx.step().rendezvous;
    if (rendezvous == nullptr) {
      done(NoRendezvous(key_));
      return;
    }
    OpKernelContext* c = &ctx;
    rendezvous->RecvAsync(key_, [this, c, done = std::move(done)](const Status& status, Rendezvous::Item item) {
      if (!status.ok()) {
        done(Status(status.code(), StrCat("receiving ", key_.ToString(), ": ", status.message())));
        return;
      }
      auto moved = TransferTensor(item.value, item.device, c->device());
      if (!moved.ok()) {
        done(moved.status().WithContext(StrCat("moving ", key_.ToString())));
        return;
      }
      c->set_output(0, std::move(*moved));
      done(Status());
    });
  }

 private:
  RendezvousKey key_;
};

}  // namespace

Expected<Tensor> TransferTensor(const Tensor& value, const RuntimeDevice* src, const RuntimeDevice& dst) {
  if (src == &dst || value.dtype() == DType::kString || value.dtype() == DType::kResource) return value;
  if (value.host_visible() && dst.host_visible()) return value;
  if (src != nullptr && !value.host_visible() && src->table() == dst.table() && src->table()->copy_peer != nullptr &&
      value.byte_size() > 0) {
    WEFT_ASSIGN_OR_RETURN(Tensor out, dst.Allocate(value.dtype(), value.shape()));
    Status peer = plugin::TakeStatus(src->table()->copy_peer(src->handle(), src->stream(), value.buffer()->device_buffer(),
                                                             value.offset(), dst.handle(), out.buffer()->device_buffer(),
                                                             out.offset(), value.byte_size()));
    if (peer.ok()) {
      WEFT_RETURN_IF_ERROR(plugin::TakeStatus(src->table()->stream_synchronize(src->handle(), src->stream()))
                               .WithContext(StrCat(src->name(), ": peer copy to ", dst.name())));
      return out;
    }
    if (peer.code() != Code::kUnimplemented) return peer.WithContext(StrCat("peer copy from ", src->name(), " to ", dst.name()));
  }
  Tensor host = value;
  if (!value.host_visible()) {
    if (src == nullptr) return InternalError("a device tensor arrived without its device");
    WEFT_ASSIGN_OR_RETURN(host, src->CopyToHost(value));
  }
  if (dst.host_visible()) return host;
  return dst.CopyFromHost(host);
}

Expected<std::unique_ptr<OpKernel>> CreateSendRecvKernel(const Graph::Node& node, const RuntimeDevice&) {
  if (node.op_name() == "_Send") return std::unique_ptr<OpKernel>(new SendKernel(KeyOf(node)));
  return std::unique_ptr<OpKernel>(new RecvKernel(KeyOf(node)));
}

}  // namespace weft::runtime
