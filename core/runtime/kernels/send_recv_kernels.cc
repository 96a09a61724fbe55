#include "core/runtime/kernels/send_recv_kernels.h"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "core/plugin/host_services.h"
#include "core/runtime/rendezvous.h"

namespace weft::runtime {

RendezvousKey SendRecvKeyOf(const Graph::Node& node) {
  const AttrMap& a = node.def.attrs;
  return RendezvousKey::Make(a.at("send_device").get<std::string>(),
                             static_cast<uint64_t>(a.at("send_device_incarnation").get<int64_t>()),
                             a.at("recv_device").get<std::string>(), a.at("tensor_name").get<std::string>());
}

namespace {

Status NoRendezvous(const RendezvousKey& key) {
  return InternalError("tensor ", key.ToString(), " crosses devices, but the step has no rendezvous");
}

// The key of one transfer in the frame and iteration |ctx| runs in: in a
// loop, each iteration's value is a transfer of its own.
RendezvousKey InFrame(const RendezvousKey& key, const OpKernelContext& ctx) {
  if (ctx.frame_id() == 0 && ctx.iteration() == 0) return key;
  return RendezvousKey::Make(key.src_device, key.src_incarnation, key.dst_device, key.edge_name, ctx.frame_id(),
                             ctx.iteration());
}

class SendKernel : public OpKernel {
 public:
  explicit SendKernel(RendezvousKey key) : key_(std::move(key)) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    Rendezvous* rendezvous = ctx.step().rendezvous;
    if (rendezvous == nullptr) return NoRendezvous(key_);
    if (ctx.input_dead()) return rendezvous->Send(InFrame(key_, ctx), Rendezvous::Item{Tensor(), &ctx.device(), true});
    return rendezvous->Send(InFrame(key_, ctx), Rendezvous::Item{ctx.input(0), &ctx.device(), false});
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
    RendezvousKey key = InFrame(key_, ctx);
    rendezvous->RecvAsync(key, [c, key, done = std::move(done)](const Status& status, Rendezvous::Item item) {
      if (!status.ok()) {
        done(Status(status.code(), StrCat("receiving ", key.ToString(), ": ", status.message())));
        return;
      }
      if (item.is_dead) {
        c->set_output_dead(true);
        done(Status());
        return;
      }
      TransferTensorAsync(item.value, item.device, c->device(), [c, key, done](Expected<Tensor> moved) {
        if (!moved.ok()) {
          done(moved.status().WithContext(StrCat("moving ", key.ToString())));
          return;
        }
        c->set_output(0, std::move(*moved));
        done(Status());
      });
    });
  }

 private:
  RendezvousKey key_;
};

// Runs work handed over from a plugin's event callbacks. Those callbacks
// run on the plugin's own threads, where blocking calls into the plugin
// (a stream synchronize, as the next kernels may do) are not allowed: the
// step goes on here instead.
class CompletionThread {
 public:
  static CompletionThread& Get() {
    static CompletionThread* thread = new CompletionThread();  // lives as long as the process
    return *thread;
  }
  void Post(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_one();
  }

 private:
  CompletionThread() {
    std::thread([this] {
      for (;;) {
        std::function<void()> work;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [this] { return !queue_.empty(); });
          work = std::move(queue_.front());
          queue_.pop_front();
        }
        work();
      }
    }).detach();
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
};

// Calls |then| once |event|, recorded now on |device|'s stream, is ready:
// the copies enqueued before it are complete. The event is released after.
// Returns an error (and never calls |then|) when the plugin cannot make,
// record or watch the event.
Status WhenStreamReaches(const RuntimeDevice& device, std::function<void(Status)> then) {
  const weft_device_plugin_t* t = device.table();
  weft_event_t event = nullptr;
  WEFT_RETURN_IF_ERROR(plugin::TakeStatus(t->event_create(device.handle(), &event)));
  Status recorded = plugin::TakeStatus(t->event_record(device.handle(), event, device.stream()));
  if (!recorded.ok()) {
    t->event_destroy(device.handle(), event);
    return recorded;
  }
  struct Pending {
    const RuntimeDevice* device;
    weft_event_t event;
    std::function<void(Status)> then;
  };
  // |then| may hold this device's buffers (and the step's, through its
  // own continuation): the device is held until |then| is gone, so that a
  // step that ends when |then| runs cannot close the device under it.
  device.Hold();
  auto* pending = new Pending{&device, event, std::move(then)};
  Status watched = plugin::TakeStatus(t->event_on_ready(
      device.handle(), event,
      [](void* user, weft_status_t status) {
        std::shared_ptr<Pending> p(static_cast<Pending*>(user));
        Status result = plugin::TakeStatus(status);
        CompletionThread::Get().Post([p, result] {
          const RuntimeDevice* held = p->device;
          held->table()->event_destroy(held->handle(), p->event);
          std::function<void(Status)> next = std::move(p->then);
          p->then = nullptr;
          next(result);
          next = nullptr;  // what it captured goes before the hold does
          held->Release();
        });
      },
      pending));
  if (!watched.ok()) {
    delete pending;
    t->event_destroy(device.handle(), event);
    device.Release();
  }
  return watched;
}

}  // namespace

void TransferTensorAsync(const Tensor& value, const RuntimeDevice* src, const RuntimeDevice& dst,
                         std::function<void(Expected<Tensor>)> done) {
  const bool from_device = src != nullptr && src != &dst && !value.host_visible() && value.byte_size() > 0 &&
                           value.dtype() != DType::kString && value.dtype() != DType::kResource;
  const bool peer = from_device && src->table() == dst.table() && src->table()->copy_peer != nullptr;
  if (!from_device || peer) {
    // Nothing to wait for on the host (or a peer copy, kept synchronous).
    done(TransferTensor(value, src, dst));
    return;
  }
  // Device -> host on the source's stream; once its event is ready, the
  // host copy goes on to the destination.
  auto host = Tensor::Allocate(value.dtype(), value.shape());
  if (!host.ok()) {
    done(host.status());
    return;
  }
  Status copied = plugin::TakeStatus(src->table()->copy_device_to_host(src->handle(), src->stream(),
                                                                       value.buffer()->device_buffer(), value.offset(),
                                                                       host->raw_data(), value.byte_size()));
  if (!copied.ok()) {
    done(copied.WithContext(StrCat(src->name(), ": copying to the host")));
    return;
  }
  Tensor keep_source = value;  // the device buffer must live until the copy is done
  Tensor host_value = *host;
  const RuntimeDevice* to = &dst;
  Status watched = WhenStreamReaches(*src, [keep_source, host_value, to, done](Status status) {
    if (!status.ok()) {
      done(status);
      return;
    }
    if (to->host_visible()) {
      done(host_value);
      return;
    }
    // Host -> device on the destination's stream. Kernels that read the
    // result go on that same stream after it, so they need not wait; the
    // host copy stays alive until the transfer has completed.
    auto out = to->Allocate(host_value.dtype(), host_value.shape());
    if (!out.ok()) {
      done(out.status());
      return;
    }
    Status enqueued = plugin::TakeStatus(
        to->table()->copy_host_to_device(to->handle(), to->stream(), host_value.raw_data(),
                                         out->buffer()->device_buffer(), out->offset(), host_value.byte_size()));
    if (!enqueued.ok()) {
      done(enqueued.WithContext(StrCat(to->name(), ": copying from the host")));
      return;
    }
    Status kept = WhenStreamReaches(*to, [host_value](Status) {});
    if (!kept.ok()) {
      // Cannot watch the copy: wait for it here instead.
      Status synced = plugin::TakeStatus(to->table()->stream_synchronize(to->handle(), to->stream()));
      if (!synced.ok()) {
        done(synced);
        return;
      }
    }
    done(*out);
  });
  if (!watched.ok()) {
    // No events: wait for the copy on this thread.
    Status synced = plugin::TakeStatus(src->table()->stream_synchronize(src->handle(), src->stream()));
    if (!synced.ok()) {
      done(synced);
      return;
    }
    done(TransferTensor(host_value, nullptr, dst));
  }
}

Expected<Tensor> TransferTensor(const Tensor& value, const RuntimeDevice* src, const RuntimeDevice& dst) {
  if (src == &dst || value.dtype() == DType::kString || value.dtype() == DType::kResource) return value;
  if (value.host_visible() && dst.host_visible()) return value;
  if (src != nullptr && !value.host_visible() && src->table() == dst.table() && src->table()->copy_peer != nullptr &&
      value.byte_size() > 0) {
    WEFT_ASSIGN_OR_RETURN(Tensor out, dst.Allocate(value.dtype(), value.shape()));
    Status peer = plugin::TakeStatus(
        src->table()->copy_peer(src->handle(), src->stream(), value.buffer()->device_buffer(), value.offset(),
                                dst.handle(), out.buffer()->device_buffer(), out.offset(), value.byte_size()));
    if (peer.ok()) {
      WEFT_RETURN_IF_ERROR(plugin::TakeStatus(src->table()->stream_synchronize(src->handle(), src->stream()))
                               .WithContext(StrCat(src->name(), ": peer copy to ", dst.name())));
      return out;
    }
    if (peer.code() != Code::kUnimplemented)
      return peer.WithContext(StrCat("peer copy from ", src->name(), " to ", dst.name()));
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
  if (node.op_name() == "_Send") return std::unique_ptr<OpKernel>(new SendKernel(SendRecvKeyOf(node)));
  return std::unique_ptr<OpKernel>(new RecvKernel(SendRecvKeyOf(node)));
}

}  // namespace weft::runtime
