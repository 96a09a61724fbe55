// The nccl collectives plugin's implementation (weft/weft_collectives.h):
// AllReduce, AllGather and Broadcast of CUDA memory through NCCL. Loaded by
// the front (nccl_front.cc) only when the CUDA runtime finds a device.
//
// A communicator is an NCCL communicator created non-blocking
// (config.blocking = 0), so that neither its creation nor an operation can
// hang past its deadline: NCCL answers ncclInProgress and the plugin polls
// ncclCommGetAsyncError until the state settles or the deadline passes, and
// then aborts. Rank 0 makes the unique id and publishes it in the host's
// store under <key_prefix>/nccl_id; the other ranks read it from there.
//
// As in the gloo plugin, one executor thread per communicator runs the
// operations in the order they were issued (the host issues the same ones in
// the same order on every rank, so this cannot deadlock). Running one
// enqueues it on the caller's stream (op->stream) and calls done: for device
// memory done means "enqueued in the stream's order", the work itself runs
// on the GPU after. While idle the same thread polls the communicator's
// asynchronous error, which is where a peer's failure shows up.
//
// The first failure (an NCCL error, a deadline, comm_abort) aborts the NCCL
// communicator, which also makes the peers' operations fail instead of
// waiting out their timeouts, and fails every later operation with its
// reason. Every NCCL call on one communicator is made under its mutex, and
// the handle is forgotten when it is aborted, so no call ever sees a freed
// communicator.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "weft/sdk/guard.h"
#include "weft/sdk/log.h"
#include "weft/sdk/plugin.h"
#include "weft/weft_plugin.h"

namespace {

using weft::sdk::Error;
using weft::sdk::Guard;
using Clock = std::chrono::steady_clock;

// How often an idle communicator looks for an asynchronous error.
constexpr std::chrono::milliseconds kIdlePoll{100};

std::string CudaText(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

weft_code_t CodeOf(ncclResult_t r) {
  switch (r) {
    case ncclInvalidArgument: return WEFT_INVALID_ARGUMENT;
    case ncclInvalidUsage: return WEFT_FAILED_PRECONDITION;
    case ncclInternalError: return WEFT_INTERNAL;
    default: return WEFT_UNAVAILABLE;  // CUDA, system and remote errors: a device, a peer or a link is gone
  }
}

// "<call>: <NCCL's words for r> (<NCCL's last message>)".
std::string NcclText(const char* call, ncclResult_t r, ncclComm_t comm) {
  std::string text = std::string(call) + ": " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') text += std::string(" (") + last + ")";
  return text;
}

// Makes |device| current on this thread and restores the previous one, so
// that a host thread calling in keeps its own device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ == device) return;
    const cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(WEFT_UNAVAILABLE, "cudaSetDevice(" + std::to_string(device) + "): " + CudaText(e));
    }
    restore_ = previous_ >= 0;
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() {
    if (restore_) (void)cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
  bool restore_ = false;
};

// Waits, polling with a growing pause, until |state|() says the pending
// NCCL call settled (anything but ncclInProgress) or |deadline| passed;
// returns the last state. |state| returns ncclInProgress to keep waiting.
template <class State>
ncclResult_t Settle(State state, Clock::time_point deadline) {
  std::chrono::microseconds pause{50};
  for (;;) {
    const ncclResult_t r = state();
    if (r != ncclInProgress || Clock::now() >= deadline) return r;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
}

struct Comm {
  int rank = 0;
  int size = 1;
  int device = 0;
  std::vector<std::string> names;
  std::chrono::milliseconds timeout{60000};

  std::mutex mutex;
  // Guarded by |mutex|, as is every NCCL call on it. Null once aborted or
  // destroyed.
  ncclComm_t nccl = nullptr;
  // The first failure; every later operation fails with it.
  std::string failed;
  std::condition_variable wake;
  std::deque<std::function<void()>> jobs;
  bool stopping = false;
  std::thread executor;

  std::string Who() const { return "rank " + std::to_string(rank) + " (" + names[rank] + ")"; }

  // Records the first failure and aborts the NCCL communicator, which
  // makes the peers fail at once. Called with |mutex| held.
  void FailLocked(const std::string& why) {
    if (failed.empty()) failed = why;
    if (nccl == nullptr) return;
    const ncclComm_t doomed = std::exchange(nccl, nullptr);
    try {
      DeviceScope scope(device);
      const ncclResult_t r = ncclCommAbort(doomed);
      if (r != ncclSuccess) {
        WEFT_SDK_LOG(WARNING) << "ncclCommAbort after a failure: " << ncclGetErrorString(r);
      }
    } catch (const std::exception& e) {
      WEFT_SDK_LOG(WARNING) << "aborting the communicator after a failure: " << e.what();
    }
  }

  void Fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex);
    FailLocked(why);
  }

  // Looks for an asynchronous error (a peer's failure, a kernel's fault)
  // and fails the communicator with it.
  void Poll() {
    std::lock_guard<std::mutex> lock(mutex);
    if (nccl == nullptr) return;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(nccl, &state);
    if (r != ncclSuccess) {
      FailLocked(NcclText("ncclCommGetAsyncError", r, nccl));
    } else if (state != ncclSuccess && state != ncclInProgress) {
      FailLocked(Who() + ": " + NcclText("asynchronous NCCL error", state, nccl));
    }
  }

  void Run() {
    // Enqueueing needs no particular device (NCCL uses the communicator's),
    // but the thread's own CUDA calls, if any, should land on this one.
    if (cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex);
        if (!wake.wait_for(lock, kIdlePoll, [&] { return stopping || !jobs.empty(); })) {
          lock.unlock();
          Poll();
          continue;
        }
        if (jobs.empty()) return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      job();
    }
  }

  std::chrono::milliseconds Timeout(const weft_comm_op_t* op) const {
    return op != nullptr && op->timeout_ms > 0 ? std::chrono::milliseconds(op->timeout_ms) : timeout;
  }

  // Enqueues one NCCL operation: |call|(comm) under the mutex, then, if
  // NCCL answered ncclInProgress, waits for the enqueue to settle. An error
  // or the deadline fails the communicator.
  weft_status_t Enqueue(const char* what, const std::function<ncclResult_t(ncclComm_t)>& call,
                        std::chrono::milliseconds op_timeout) {
    const Clock::time_point deadline = Clock::now() + op_timeout;
    ncclResult_t r;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!failed.empty()) return weft::sdk::MakeStatus(WEFT_UNAVAILABLE, failed.c_str());
      r = call(nccl);
      if (r != ncclSuccess && r != ncclInProgress) {
        const std::string why = Who() + ": " + NcclText(what, r, nccl);
        FailLocked(why);
        return weft::sdk::MakeStatus(CodeOf(r), why.c_str());
      }
    }
    if (r == ncclSuccess) return nullptr;
    bool aborted = false;
    r = Settle(
        [&] {
          std::lock_guard<std::mutex> lock(mutex);
          if (nccl == nullptr) {
            aborted = true;
            return ncclSuccess;
          }
          ncclResult_t state = ncclSuccess;
          const ncclResult_t q = ncclCommGetAsyncError(nccl, &state);
          return q != ncclSuccess ? q : state;
        },
        deadline);
    std::lock_guard<std::mutex> lock(mutex);
    if (aborted || !failed.empty()) return weft::sdk::MakeStatus(WEFT_UNAVAILABLE, failed.c_str());
    if (r == ncclSuccess) return nullptr;
    if (r == ncclInProgress) {
      const std::string why = Who() + ": " + what + " was not enqueued within " + std::to_string(op_timeout.count()) +
                              " ms; a peer may not have issued it";
      FailLocked(why);
      return weft::sdk::MakeStatus(WEFT_DEADLINE_EXCEEDED, why.c_str());
    }
    const std::string why = Who() + ": " + NcclText(what, r, nccl);
    FailLocked(why);
    return weft::sdk::MakeStatus(CodeOf(r), why.c_str());
  }

  // Queues one operation for the executor, which enqueues it and reports
  // to |done|.
  weft_status_t Submit(const char* what, std::function<ncclResult_t(ncclComm_t)> call,
                       std::chrono::milliseconds op_timeout, weft_done_fn done, void* user) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) return weft::sdk::MakeStatus(WEFT_FAILED_PRECONDITION, "the communicator is being destroyed");
      jobs.push_back([this, what, call = std::move(call), op_timeout, done, user] {
        weft_status_t status = Guard([&] { return Enqueue(what, call, op_timeout); });
        done(user, status);
      });
    }
    wake.notify_one();
    return nullptr;
  }
};

Comm* AsComm(weft_communicator_t c) {
  if (c == nullptr) throw Error(WEFT_INVALID_ARGUMENT, "the communicator is NULL");
  return reinterpret_cast<Comm*>(c);
}

ncclDataType_t DataType(weft_dtype_t dtype) {
  switch (dtype) {
    case WEFT_DTYPE_F16: return ncclFloat16;
    case WEFT_DTYPE_BF16: return ncclBfloat16;
    case WEFT_DTYPE_F32: return ncclFloat32;
    case WEFT_DTYPE_F64: return ncclFloat64;
    case WEFT_DTYPE_I32: return ncclInt32;
    case WEFT_DTYPE_I64: return ncclInt64;
    case WEFT_DTYPE_I8: return ncclInt8;
    case WEFT_DTYPE_U8: return ncclUint8;
    default: {
      const char* name = weft_dtype_name(dtype);
      throw Error(WEFT_INVALID_ARGUMENT, std::string("nccl does not move ") + (name != nullptr ? name : "that type"));
    }
  }
}

ncclRedOp_t RedOp(weft_reduction_t r) {
  switch (r) {
    case WEFT_REDUCE_SUM: return ncclSum;
    case WEFT_REDUCE_PROD: return ncclProd;
    case WEFT_REDUCE_MIN: return ncclMin;
    case WEFT_REDUCE_MAX: return ncclMax;
    default: throw Error(WEFT_INVALID_ARGUMENT, "unknown reduction " + std::to_string(r));
  }
}

void CheckBuffer(const weft_comm_buffer_t* b, const char* what) {
  if (b == nullptr) throw Error(WEFT_INVALID_ARGUMENT, std::string(what) + " is NULL");
  if (b->struct_size < WEFT_COMM_BUFFER_SIZE_V1_2) {
    throw Error(WEFT_INVALID_ARGUMENT, std::string(what) + ": weft_comm_buffer_t is smaller than ABI 1.2");
  }
  if (b->data == nullptr && b->count > 0) throw Error(WEFT_INVALID_ARGUMENT, std::string(what) + ".data is NULL");
  (void)DataType(b->dtype);
}

cudaStream_t StreamOf(const weft_comm_op_t* op) {
  return op != nullptr ? static_cast<cudaStream_t>(op->stream) : nullptr;
}

// Frees a value the host's store handed over.
struct HostFree {
  void operator()(void* p) const { weft::sdk::host()->host_free(p); }
};

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
    if (args->store == nullptr || args->store->struct_size < WEFT_KV_STORE_SIZE_V1_2 || args->key_prefix == nullptr) {
      throw Error(WEFT_INVALID_ARGUMENT, "the store and key_prefix are required");
    }
    if (args->device_type == nullptr || std::strcmp(args->device_type, "CUDA") != 0) {
      throw Error(WEFT_INVALID_ARGUMENT, std::string("nccl serves CUDA memory, not ") +
                                             (args->device_type != nullptr ? args->device_type : "(null)"));
    }
    if (args->device_ordinal < 0) {
      throw Error(WEFT_INVALID_ARGUMENT, "device ordinal " + std::to_string(args->device_ordinal));
    }
    auto comm = std::make_unique<Comm>();
    comm->rank = args->rank;
    comm->size = args->size;
    comm->device = args->device_ordinal;
    for (int i = 0; i < args->size; ++i) {
      comm->names.emplace_back(args->rank_names != nullptr && args->rank_names[i] != nullptr
                                   ? args->rank_names[i]
                                   : "rank " + std::to_string(i));
    }
    comm->timeout = std::chrono::milliseconds(args->timeout_ms > 0 ? args->timeout_ms : 60000);
    const Clock::time_point deadline = Clock::now() + comm->timeout;

    // The rendezvous: rank 0's unique id, through the host's store.
    ncclUniqueId id{};
    const weft_kv_store_t* store = args->store;
    const std::string key = std::string(args->key_prefix) + "/nccl_id";
    if (comm->rank == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) throw Error(CodeOf(r), comm->Who() + ": " + NcclText("ncclGetUniqueId", r, nullptr));
      weft::sdk::ThrowIfError(store->set(store->user, key.c_str(), &id, sizeof id));
    } else {
      void* data = nullptr;
      size_t size = 0;
      weft::sdk::ThrowIfError(store->get(store->user, key.c_str(), comm->timeout.count(), &data, &size));
      std::unique_ptr<void, HostFree> owned(data);
      if (size != sizeof id || data == nullptr) {
        throw Error(WEFT_INTERNAL, "rendezvous: " + key + " holds " + std::to_string(size) + " bytes, not the " +
                                       std::to_string(sizeof id) + " of an NCCL unique id");
      }
      std::memcpy(&id, data, sizeof id);
    }

    // Joining: non-blocking, so that a rank that never comes cannot hold
    // this call past the deadline.
    DeviceScope scope(comm->device);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t nccl = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&nccl, comm->size, id, comm->rank, &config);
    if (r == ncclInProgress && nccl != nullptr) {
      r = Settle(
          [&] {
            ncclResult_t state = ncclSuccess;
            const ncclResult_t q = ncclCommGetAsyncError(nccl, &state);
            return q != ncclSuccess ? q : state;
          },
          deadline);
    }
    if (r != ncclSuccess) {
      std::string why;
      weft_code_t code = CodeOf(r);
      if (r == ncclInProgress) {
        code = WEFT_DEADLINE_EXCEEDED;
        why = comm->Who() + " of " + std::to_string(comm->size) + ": ncclCommInitRankConfig did not complete within " +
              std::to_string(comm->timeout.count()) + " ms; not every rank joined";
      } else {
        why = comm->Who() + " of " + std::to_string(comm->size) + ": " + NcclText("ncclCommInitRankConfig", r, nccl);
      }
      if (nccl != nullptr) (void)ncclCommAbort(nccl);
      throw Error(code, why);
    }
    comm->nccl = nccl;
    Comm* raw = comm.get();
    comm->executor = std::thread([raw] { raw->Run(); });
    *out = reinterpret_cast<weft_communicator_t>(comm.release());
  });
}

void CommDestroy(weft_communicator_t c) {
  weft::sdk::GuardVoid("comm_destroy", [&] {
    if (c == nullptr) return;
    std::unique_ptr<Comm> comm(AsComm(c));
    {
      std::lock_guard<std::mutex> lock(comm->mutex);
      comm->stopping = true;
    }
    comm->wake.notify_all();
    if (comm->executor.joinable()) comm->executor.join();
    // Nothing is left to enqueue: release the NCCL communicator, unless a
    // failure already aborted it.
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (comm->nccl == nullptr) return;
    const ncclComm_t nccl = std::exchange(comm->nccl, nullptr);
    DeviceScope scope(comm->device);
    ncclResult_t r = ncclCommFinalize(nccl);
    if (r == ncclInProgress || r == ncclSuccess) {
      r = Settle(
          [&] {
            ncclResult_t state = ncclSuccess;
            const ncclResult_t q = ncclCommGetAsyncError(nccl, &state);
            return q != ncclSuccess ? q : state;
          },
          Clock::now() + comm->timeout);
    }
    if (r != ncclSuccess) {
      WEFT_SDK_LOG(WARNING) << comm->Who() << ": the communicator did not finish cleanly ("
                            << (r == ncclInProgress ? "timed out" : ncclGetErrorString(r)) << "); aborting it";
      (void)ncclCommAbort(nccl);
      return;
    }
    r = ncclCommDestroy(nccl);
    if (r != ncclSuccess) {
      WEFT_SDK_LOG(WARNING) << comm->Who() << ": ncclCommDestroy: " << ncclGetErrorString(r);
    }
  });
}

void CommAbort(weft_communicator_t c, const char* reason) {
  weft::sdk::GuardVoid("comm_abort", [&] {
    if (c == nullptr) return;
    AsComm(c)->Fail(std::string("aborted: ") + (reason != nullptr ? reason : ""));
  });
}

weft_status_t AllReduce(weft_communicator_t c, const weft_comm_op_t* op, const weft_comm_buffer_t* in,
                        const weft_comm_buffer_t* out, weft_reduction_t reduction, weft_done_fn done, void* user) {
  return Guard([&]() -> weft_status_t {
    Comm* comm = AsComm(c);
    if (done == nullptr) throw Error(WEFT_INVALID_ARGUMENT, "done is NULL");
    CheckBuffer(in, "in");
    CheckBuffer(out, "out");
    if (in->dtype != out->dtype || in->count != out->count) {
      throw Error(WEFT_INVALID_ARGUMENT, "allreduce: in and out differ in type or count");
    }
    const ncclRedOp_t red = RedOp(reduction);
    const ncclDataType_t type = DataType(in->dtype);
    const weft_comm_buffer_t a = *in;
    const weft_comm_buffer_t b = *out;
    const cudaStream_t stream = StreamOf(op);
    return comm->Submit(
        "ncclAllReduce",
        [a, b, type, red, stream](ncclComm_t nccl) {
          return b.count == 0 ? ncclSuccess : ncclAllReduce(a.data, b.data, b.count, type, red, nccl, stream);
        },
        comm->Timeout(op), done, user);
  });
}

weft_status_t AllGather(weft_communicator_t c, const weft_comm_op_t* op, const weft_comm_buffer_t* in,
                        const weft_comm_buffer_t* out, weft_done_fn done, void* user) {
  return Guard([&]() -> weft_status_t {
    Comm* comm = AsComm(c);
    if (done == nullptr) throw Error(WEFT_INVALID_ARGUMENT, "done is NULL");
    CheckBuffer(in, "in");
    CheckBuffer(out, "out");
    if (in->dtype != out->dtype || out->count != in->count * static_cast<uint64_t>(comm->size)) {
      throw Error(WEFT_INVALID_ARGUMENT, "allgather: out must hold size * in.count elements of in's type");
    }
    const ncclDataType_t type = DataType(in->dtype);
    const weft_comm_buffer_t a = *in;
    const weft_comm_buffer_t b = *out;
    const cudaStream_t stream = StreamOf(op);
    return comm->Submit(
        "ncclAllGather",
        [a, b, type, stream](ncclComm_t nccl) {
          return b.count == 0 ? ncclSuccess : ncclAllGather(a.data, b.data, a.count, type, nccl, stream);
        },
        comm->Timeout(op), done, user);
  });
}

weft_status_t Broadcast(weft_communicator_t c, const weft_comm_op_t* op, const weft_comm_buffer_t* buffer, int32_t root,
                        weft_done_fn done, void* user) {
  return Guard([&]() -> weft_status_t {
    Comm* comm = AsComm(c);
    if (done == nullptr) throw Error(WEFT_INVALID_ARGUMENT, "done is NULL");
    CheckBuffer(buffer, "buffer");
    if (root < 0 || root >= comm->size) {
      throw Error(WEFT_INVALID_ARGUMENT,
                  "broadcast root " + std::to_string(root) + " is not a rank of " + std::to_string(comm->size));
    }
    const ncclDataType_t type = DataType(buffer->dtype);
    const weft_comm_buffer_t b = *buffer;
    const cudaStream_t stream = StreamOf(op);
    return comm->Submit(
        "ncclBroadcast",
        [b, type, root, stream](ncclComm_t nccl) {
          return b.count == 0 ? ncclSuccess : ncclBroadcast(b.data, b.data, b.count, type, root, nccl, stream);
        },
        comm->Timeout(op), done, user);
  });
}

constexpr const char* kDeviceTypes[] = {"CUDA"};
constexpr weft_dtype_t kDtypes[] = {WEFT_DTYPE_F16, WEFT_DTYPE_BF16, WEFT_DTYPE_F32, WEFT_DTYPE_F64,
                                    WEFT_DTYPE_I32, WEFT_DTYPE_I64,  WEFT_DTYPE_I8,  WEFT_DTYPE_U8};

const weft_plugin_t* Describe() {
  static const weft_collectives_plugin_t table = [] {
    auto t = weft::sdk::Make<weft_collectives_plugin_t>();
    t.backend = "nccl";
    t.device_types = kDeviceTypes;
    t.num_device_types = sizeof(kDeviceTypes) / sizeof(kDeviceTypes[0]);
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
    weft_plugin_t p = weft::sdk::DescribePlugin("nccl", WEFT_NCCL_PLUGIN_VERSION, WEFT_NCCL_PLUGIN_DESCRIPTION,
                                                WEFT_PLUGIN_COLLECTIVES);
    p.collectives = &table;
    return p;
  }();
  return &plugin;
}

}  // namespace

WEFT_SDK_DEFINE_PLUGIN(Describe)
