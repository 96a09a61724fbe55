// The gloo collectives plugin (weft/weft_collectives.h): AllReduce,
// AllGather and Broadcast of host memory over Gloo's TCP transport.
//
// A communicator is a Gloo context whose pairs connect every rank to every
// other (connectFullMesh), rendezvousing through the host's store, plus one
// executor thread that runs the operations in the order they were issued.
// The host issues the same operations in the same order on every rank
// (docs/distributed-internals.md, "Allreduce"), so one FIFO per rank cannot
// deadlock.
//
// Gloo reports a dead peer (the connection closed) at once and a hung one
// at the operation's timeout, as an exception; after either, the pairs are
// unusable, so the communicator is failed for good: every later operation
// fails with the first error, and the links are closed so that the other
// ranks fail at once too instead of waiting out their timeouts.
//
// Joining ends with a barrier. connectFullMesh returns on a rank once its
// own links are up, which for the connecting side of a link is before the
// listening side has accepted it; a rank that then left at once (a group
// with nothing to do) closed a link its slower peer was still accepting,
// and that peer's join failed with "Connection closed by peer". After the
// barrier every rank has finished linking.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "weft/sdk/guard.h"
#include "weft/sdk/half.h"
#include "weft/sdk/plugin.h"
#include "weft/weft_plugin.h"

namespace {

using weft::sdk::Error;
using weft::sdk::Guard;

// The host's store, as Gloo's Store. Failures are thrown as weft::sdk::
// Error; the guard around comm_create turns them into a status.
class WeftStore final : public gloo::rendezvous::Store {
 public:
  WeftStore(const weft_kv_store_t* kv, std::chrono::milliseconds timeout) : kv_(kv), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Check(kv_->set(kv_->user, key.c_str(), data.data(), data.size()));
  }

  std::vector<char> get(const std::string& key) override {
    void* data = nullptr;
    size_t size = 0;
    Check(kv_->get(kv_->user, key.c_str(), timeout_.count(), &data, &size));
    std::vector<char> out(static_cast<const char*>(data), static_cast<const char*>(data) + size);
    weft::sdk::host()->host_free(data);
    return out;
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    std::vector<const char*> names;
    names.reserve(keys.size());
    for (const std::string& key : keys) names.push_back(key.c_str());
    Check(kv_->wait(kv_->user, names.data(), names.size(), timeout.count()));
  }

 private:
  // The host's own code and words (DEADLINE_EXCEEDED naming the key) go
  // through Gloo unchanged: nothing in connectFullMesh catches them.
  static void Check(weft_status_t status) {
    if (status == nullptr) return;
    weft::sdk::Status owned(status);
    throw Error(owned.code(), owned.message());
  }

  const weft_kv_store_t* kv_;
  std::chrono::milliseconds timeout_;
};

struct Comm {
  int rank = 0;
  int size = 1;
  std::vector<std::string> names;
  std::chrono::milliseconds timeout{60000};
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void()>> jobs;
  bool stopping = false;
  // The first failure; every later operation fails with it.
  std::string failed;
  std::thread executor;

  void Run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || !jobs.empty(); });
        if (jobs.empty()) return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      job();
    }
  }

  // Records the first failure and closes every link, so that the peers'
  // operations fail at once.
  void Fail(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!failed.empty()) return;
      failed = why;
    }
    try {
      context->closeConnections();
    } catch (const std::exception& e) {
      WEFT_SDK_LOG(WARNING) << "closing the links after a failure: " << e.what();
    }
  }

  std::string Failed() {
    std::lock_guard<std::mutex> lock(mutex);
    return failed;
  }

  std::chrono::milliseconds Timeout(const weft_comm_op_t* op) const {
    return op != nullptr && op->timeout_ms > 0 ? std::chrono::milliseconds(op->timeout_ms) : timeout;
  }

  // Queues |body| (which runs a Gloo operation) and reports it to |done|.
  weft_status_t Submit(std::function<void()> body, weft_done_fn done, void* user) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) return weft::sdk::MakeStatus(WEFT_FAILED_PRECONDITION, "the communicator is being destroyed");
      jobs.push_back([this, body = std::move(body), done, user] {
        std::string failure = Failed();
        if (failure.empty()) {
          try {
            body();
          } catch (const std::exception& e) {
            failure = e.what();
            Fail(failure);
          }
        }
        done(user, failure.empty() ? nullptr : weft::sdk::MakeStatus(WEFT_UNAVAILABLE, failure.c_str()));
      });
    }
    wake.notify_one();
    return nullptr;
  }
};

Comm* AsComm(weft_communicator_t c) { return reinterpret_cast<Comm*>(c); }

// bfloat16: Gloo has no type for it, so these widen to f32 and round back.
struct Bf16Ops {
  template <class F>
  static void Apply(void* c, const void* a, const void* b, size_t n, F f) {
    const auto* x = static_cast<const uint16_t*>(a);
    const auto* y = static_cast<const uint16_t*>(b);
    auto* z = static_cast<uint16_t*>(c);
    for (size_t i = 0; i < n; ++i) {
      z[i] = weft::sdk::FloatToBfloat16(f(weft::sdk::Bfloat16ToFloat(x[i]), weft::sdk::Bfloat16ToFloat(y[i])));
    }
  }
  static void Sum(void* c, const void* a, const void* b, size_t n) {
    Apply(c, a, b, n, [](float p, float q) { return p + q; });
  }
  static void Prod(void* c, const void* a, const void* b, size_t n) {
    Apply(c, a, b, n, [](float p, float q) { return p * q; });
  }
  static void Min(void* c, const void* a, const void* b, size_t n) {
    Apply(c, a, b, n, [](float p, float q) { return q < p ? q : p; });
  }
  static void Max(void* c, const void* a, const void* b, size_t n) {
    Apply(c, a, b, n, [](float p, float q) { return q > p ? q : p; });
  }
};

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <class T>
ReduceFn Typed(weft_reduction_t r) {
  switch (r) {
    case WEFT_REDUCE_SUM: return &gloo::sum<T>;
    case WEFT_REDUCE_PROD: return &gloo::product<T>;
    case WEFT_REDUCE_MIN: return &gloo::min<T>;
    case WEFT_REDUCE_MAX: return &gloo::max<T>;
    default: throw Error(WEFT_INVALID_ARGUMENT, "unknown reduction " + std::to_string(r));
  }
}

ReduceFn Reduction(weft_dtype_t dtype, weft_reduction_t r) {
  switch (dtype) {
    case WEFT_DTYPE_F32: return Typed<float>(r);
    case WEFT_DTYPE_F64: return Typed<double>(r);
    case WEFT_DTYPE_I32: return Typed<int32_t>(r);
    case WEFT_DTYPE_I64: return Typed<int64_t>(r);
    case WEFT_DTYPE_I8: return Typed<int8_t>(r);
    case WEFT_DTYPE_U8: return Typed<uint8_t>(r);
    case WEFT_DTYPE_F16: return Typed<gloo::float16>(r);
    case WEFT_DTYPE_BF16:
      switch (r) {
        case WEFT_REDUCE_SUM: return &Bf16Ops::Sum;
        case WEFT_REDUCE_PROD: return &Bf16Ops::Prod;
        case WEFT_REDUCE_MIN: return &Bf16Ops::Min;
        case WEFT_REDUCE_MAX: return &Bf16Ops::Max;
        default: throw Error(WEFT_INVALID_ARGUMENT, "unknown reduction " + std::to_string(r));
      }
    default: {
      const char* name = weft_dtype_name(dtype);
      throw Error(WEFT_INVALID_ARGUMENT, std::string("gloo does not reduce ") + (name != nullptr ? name : "that type"));
    }
  }
}

void CheckBuffer(const weft_comm_buffer_t* b, const char* what) {
  if (b == nullptr) throw Error(WEFT_INVALID_ARGUMENT, std::string(what) + " is NULL");
  if (b->data == nullptr && b->count > 0) throw Error(WEFT_INVALID_ARGUMENT, std::string(what) + ".data is NULL");
  if (weft_dtype_size(b->dtype) == 0 || b->dtype == WEFT_DTYPE_STRING || b->dtype == WEFT_DTYPE_RESOURCE) {
    throw Error(WEFT_INVALID_ARGUMENT, std::string(what) + " has an element type gloo cannot move");
  }
}

size_t Bytes(const weft_comm_buffer_t& b) { return b.count * weft_dtype_size(b.dtype); }

// Gloo takes the element size from the setters' type and hands the reduce
// function element counts; any type of the right width will do, since the
// function itself is typed. In place when in == out; otherwise Gloo copies
// in to out as it goes.
template <class T>
void SetBuffers(gloo::AllreduceOptions& o, const weft_comm_buffer_t& in, const weft_comm_buffer_t& out) {
  if (in.data != out.data) o.setInput(static_cast<T*>(in.data), in.count);
  o.setOutput(static_cast<T*>(out.data), out.count);
}

weft_status_t CommCreate(const weft_comm_args_t* args, weft_communicator_t* out) {
  return Guard([&] {
    if (args == nullptr || out == nullptr) throw Error(WEFT_INVALID_ARGUMENT, "args and out_comm must not be NULL");
    *out = nullptr;
    if (args->struct_size < WEFT_COMM_ARGS_SIZE_V1_2) {
      throw Error(WEFT_INVALID_ARGUMENT, "weft_comm_args_t is smaller than ABI 1.2");
    }
    if (args->size < 1 || args->rank < 0 || args->rank >= args->size) {
      throw Error(WEFT_INVALID_ARGUMENT, "rank " + std::to_string(args->rank) + " of " + std::to_string(args->size));
    }
    if (args->store == nullptr || args->store->struct_size < WEFT_KV_STORE_SIZE_V1_2 || args->rank_hosts == nullptr ||
        args->key_prefix == nullptr) {
      throw Error(WEFT_INVALID_ARGUMENT, "the store, rank_hosts and key_prefix are required");
    }
    if (args->device_type == nullptr || std::strcmp(args->device_type, "CPU") != 0) {
      throw Error(WEFT_INVALID_ARGUMENT, std::string("gloo serves host memory (CPU), not ") +
                                             (args->device_type != nullptr ? args->device_type : "(null)"));
    }
    auto comm = std::make_unique<Comm>();
    comm->rank = args->rank;
    comm->size = args->size;
    for (int i = 0; i < args->size; ++i) {
      comm->names.emplace_back(args->rank_names != nullptr && args->rank_names[i] != nullptr
                                   ? args->rank_names[i]
                                   : "rank " + std::to_string(i));
    }
    comm->timeout = std::chrono::milliseconds(args->timeout_ms > 0 ? args->timeout_ms : 60000);

    gloo::transport::tcp::attr attr;
    attr.hostname = args->rank_hosts[args->rank] != nullptr ? args->rank_hosts[args->rank] : "127.0.0.1";
    comm->device = gloo::transport::tcp::CreateDevice(attr);
    comm->context = std::make_shared<gloo::rendezvous::Context>(args->rank, args->size);
    comm->context->setTimeout(comm->timeout);
    WeftStore store(args->store, comm->timeout);
    gloo::rendezvous::PrefixStore prefixed(args->key_prefix, store);
    try {
      comm->context->connectFullMesh(prefixed, comm->device);
    } catch (const gloo::Exception& e) {
      throw Error(WEFT_UNAVAILABLE, e.what());
    }
    try {
      gloo::BarrierOptions linked(comm->context);
      linked.setTimeout(comm->timeout);
      gloo::barrier(linked);
    } catch (const gloo::Exception& e) {
      throw Error(WEFT_UNAVAILABLE,
                  std::string("linked to every rank, then waiting for the others to link: ") + e.what());
    }
    Comm* raw = comm.get();
    comm->executor = std::thread([raw] { raw->Run(); });
    *out = reinterpret_cast<weft_communicator_t>(comm.release());
  });
}

void CommDestroy(weft_communicator_t c) {
  weft::sdk::GuardVoid("comm_destroy", [&] {
    Comm* comm = AsComm(c);
    if (comm == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(comm->mutex);
      comm->stopping = true;
    }
    comm->wake.notify_all();
    if (comm->executor.joinable()) comm->executor.join();
    delete comm;
  });
}

void CommAbort(weft_communicator_t c, const char* reason) {
  weft::sdk::GuardVoid("comm_abort", [&] {
    Comm* comm = AsComm(c);
    if (comm == nullptr) return;
    comm->Fail(std::string("aborted: ") + (reason != nullptr ? reason : ""));
  });
}

weft_status_t AllReduce(weft_communicator_t c, const weft_comm_op_t* op, const weft_comm_buffer_t* in,
                        const weft_comm_buffer_t* out, weft_reduction_t reduction, weft_done_fn done, void* user) {
  return Guard([&]() -> weft_status_t {
    Comm* comm = AsComm(c);
    CheckBuffer(in, "in");
    CheckBuffer(out, "out");
    if (in->dtype != out->dtype || in->count != out->count) {
      throw Error(WEFT_INVALID_ARGUMENT, "allreduce: in and out differ in type or count");
    }
    const ReduceFn fn = Reduction(in->dtype, reduction);
    const weft_comm_buffer_t a = *in;
    const weft_comm_buffer_t b = *out;
    const uint32_t tag = op != nullptr ? op->tag : 0;
    const auto timeout = comm->Timeout(op);
    return comm->Submit(
        [comm, a, b, fn, tag, timeout] {
          if (b.count == 0) return;
          gloo::AllreduceOptions o(comm->context);
          switch (weft_dtype_size(b.dtype)) {
            case 1: SetBuffers<uint8_t>(o, a, b); break;
            case 2: SetBuffers<uint16_t>(o, a, b); break;
            case 4: SetBuffers<uint32_t>(o, a, b); break;
            default: SetBuffers<uint64_t>(o, a, b); break;
          }
          o.setReduceFunction(fn);
          o.setTag(tag);
          o.setTimeout(timeout);
          gloo::allreduce(o);
        },
        done, user);
  });
}

weft_status_t AllGather(weft_communicator_t c, const weft_comm_op_t* op, const weft_comm_buffer_t* in,
                        const weft_comm_buffer_t* out, weft_done_fn done, void* user) {
  return Guard([&]() -> weft_status_t {
    Comm* comm = AsComm(c);
    CheckBuffer(in, "in");
    CheckBuffer(out, "out");
    if (in->dtype != out->dtype || out->count != in->count * static_cast<uint64_t>(comm->size)) {
      throw Error(WEFT_INVALID_ARGUMENT, "allgather: out must hold size * in.count elements of in's type");
    }
    const weft_comm_buffer_t a = *in;
    const weft_comm_buffer_t b = *out;
    const uint32_t tag = op != nullptr ? op->tag : 0;
    const auto timeout = comm->Timeout(op);
    return comm->Submit(
        [comm, a, b, tag, timeout] {
          if (b.count == 0) return;
          gloo::AllgatherOptions o(comm->context);
          o.setInput(static_cast<char*>(a.data), Bytes(a));
          o.setOutput(static_cast<char*>(b.data), Bytes(b));
          o.setTag(tag);
          o.setTimeout(timeout);
          gloo::allgather(o);
        },
        done, user);
  });
}

weft_status_t Broadcast(weft_communicator_t c, const weft_comm_op_t* op, const weft_comm_buffer_t* buffer, int32_t root,
                        weft_done_fn done, void* user) {
  return Guard([&]() -> weft_status_t {
    Comm* comm = AsComm(c);
    CheckBuffer(buffer, "buffer");
    if (root < 0 || root >= comm->size) {
      throw Error(WEFT_INVALID_ARGUMENT,
                  "broadcast root " + std::to_string(root) + " is not a rank of " + std::to_string(comm->size));
    }
    const weft_comm_buffer_t b = *buffer;
    const uint32_t tag = op != nullptr ? op->tag : 0;
    const auto timeout = comm->Timeout(op);
    return comm->Submit(
        [comm, b, root, tag, timeout] {
          if (b.count == 0) return;
          gloo::BroadcastOptions o(comm->context);
          o.setOutput(static_cast<char*>(b.data), Bytes(b));
          o.setRoot(root);
          o.setTag(tag);
          o.setTimeout(timeout);
          gloo::broadcast(o);
        },
        done, user);
  });
}

constexpr const char* kDeviceTypes[] = {"CPU"};
constexpr weft_dtype_t kDtypes[] = {WEFT_DTYPE_F32, WEFT_DTYPE_F64, WEFT_DTYPE_I32, WEFT_DTYPE_I64,
                                    WEFT_DTYPE_I8,  WEFT_DTYPE_U8,  WEFT_DTYPE_F16, WEFT_DTYPE_BF16};

const weft_plugin_t* Describe() {
  static const weft_collectives_plugin_t table = [] {
    auto t = weft::sdk::Make<weft_collectives_plugin_t>();
    t.backend = "gloo";
    t.device_types = kDeviceTypes;
    t.num_device_types = 1;
    t.dtypes = kDtypes;
    t.num_dtypes = sizeof(kDtypes) / sizeof(kDtypes[0]);
    t.comm_create = &CommCreate;
    t.comm_destroy = &CommDestroy;
    t.comm_abort = &CommAbort;
    t.all_reduce = &AllReduce;
    t.all_gather = &AllGather;
    t.broadcast = &Broadcast;
    return t;
  }();
  static const weft_plugin_t plugin = [] {
    weft_plugin_t p = weft::sdk::DescribePlugin(
        "gloo", "0.1.0", "allreduce, allgather and broadcast of host memory over Gloo's TCP transport",
        WEFT_PLUGIN_COLLECTIVES);
    p.collectives = &table;
    return p;
  }();
  return &plugin;
}

}  // namespace

WEFT_SDK_DEFINE_PLUGIN(Describe)
