// What every oneDNN kernel of the CPU plugin shares: one engine, a stream
// per thread, OpenMP sized to the host's intra-op threads, a per-node cache
// of primitives by shape, and the f32 data and temp memories they run on.
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_DNNL_UTIL_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_DNNL_UTIL_H_

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../kernel_framework.h"
#include "weft/sdk/host.h"

namespace weft::cpu {

inline dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

inline dnnl::stream& Stream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

// oneDNN runs on OpenMP, whose thread count belongs to the calling thread:
// every thread that runs a oneDNN kernel sets it to the host's intra-op
// count (again whenever that changes).
inline void UseIntraOpThreads() {
  thread_local int threads = 0;
  const int want = sdk::host()->intra_op_threads();
  if (threads != want) {
    omp_set_num_threads(want);
    threads = want;
  }
}

// oneDNN's default scratchpad (scratchpad_mode::library) is global to the
// thread that made a primitive. A primitive made on one thread and run on
// two at once (the model server's batch threads, the executor's inter-op
// threads) shared that buffer between the runs, and answered wrong values.
// So every primitive here is made with the attrs WithUserScratchpad() gives
// and run through Execute, which gives it a scratchpad of the running
// thread's own.
inline dnnl::primitive_attr WithUserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// This thread's scratchpad, at least |bytes| long (page-aligned; it grows
// and is kept for the thread's next primitive).
inline void* ThreadScratchpad(std::size_t bytes) {
  struct Buffer {
    void* data = nullptr;
    std::size_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffer;
  if (buffer.size < bytes) {
    constexpr std::size_t kAlign = 4096;
    const std::size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
    void* grown = std::aligned_alloc(kAlign, size);
    if (grown == nullptr) throw std::bad_alloc();
    std::free(buffer.data);
    buffer.data = grown;
    buffer.size = size;
  }
  return buffer.data;
}

// Runs |primitive| (made with WithUserScratchpad) on this thread's stream
// with |args| and this thread's scratchpad, and waits for it.
inline void Execute(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory> args) {
  const dnnl_memory_desc_t* scratchpad =
      dnnl_primitive_desc_query_md(primitive.get_primitive_desc(), dnnl_query_scratchpad_md, 0);
  if (scratchpad != nullptr && dnnl_memory_desc_get_size(scratchpad) > 0) {
    const dnnl::memory::desc desc(*scratchpad);
    args.insert_or_assign(DNNL_ARG_SCRATCHPAD, dnnl::memory(desc, Engine(), ThreadScratchpad(desc.get_size())));
  }
  dnnl::stream& stream = Stream();
  primitive.execute(stream, args);
  stream.wait();
}

// A reorder from |from| to |to|, run through Execute.
inline dnnl::reorder MakeReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  return dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), from, Engine(), to, WithUserScratchpad()));
}

inline void Execute(const dnnl::reorder& reorder, const dnnl::memory& from, const dnnl::memory& to) {
  Execute(reorder, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

// One node's oneDNN primitives P by shape and intra-op thread count, each
// made once as P(args...); a null entry remembers a shape oneDNN declined
// (a dnnl::error from the constructor), so the kernel falls back to its
// own loops without asking again. Thread-safe.
//
// A primitive keeps the OpenMP thread count of the thread that made it
// and runs every execution on that many threads, so the count is set
// first: made before it, a primitive of a process configured for one
// intra-op thread ran on every core, and the idle OpenMP threads' spinning
// slowed the other processes of a cluster on the same machine.
template <class P>
class PrimitiveCache {
 public:
  template <class... Args>
  P* Get(const Dims& shape, Args&&... args) {
    UseIntraOpThreads();
    const std::pair<int, Dims> key(sdk::host()->intra_op_threads(), shape);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second.get();
    std::unique_ptr<P> prim;
    try {
      prim = std::make_unique<P>(std::forward<Args>(args)...);
    } catch (const dnnl::error&) {
      prim = nullptr;
    }
    return cache_.emplace(key, std::move(prim)).first->second.get();
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<int, Dims>, std::unique_ptr<P>> cache_;
};

// Weights reordered from the layout a kernel receives them in (|user|)
// into the one its primitive chose (|chosen|, from a `format_tag::any`
// desc), kept and reused while the weights are unchanged: while their
// buffer is the same when the op promises constant weights, else while
// their bytes are (a comparison costs less than a reorder, which is a
// parallel region of its own). Thread-safe: Get returns a handle, which
// keeps its buffer alive while a concurrent call replaces the copy.
class ReorderedWeights {
 public:
  ReorderedWeights(const dnnl::memory::desc& user, const dnnl::memory::desc& chosen) : user_(user), chosen_(chosen) {
    if (user_ != chosen_) reorder_ = MakeReorder(user_, chosen_);
  }

  // Whether the primitive takes the weights as they come.
  bool as_given() const { return user_ == chosen_; }
  const dnnl::memory::desc& user() const { return user_; }
  const dnnl::memory::desc& chosen() const { return chosen_; }

  // The weights at |weights| in the chosen layout (as_given() is false).
  dnnl::memory Get(const void* weights, bool constant) {
    const auto* bytes = static_cast<const unsigned char*>(weights);
    const std::size_t size = user_.get_size();
    std::lock_guard<std::mutex> lock(mutex_);
    const bool same =
        copy_ != nullptr && (constant ? copy_->source == weights : std::memcmp(copy_->bytes.data(), bytes, size) == 0);
    if (!same) {
      auto fresh = std::make_unique<Copy>();
      fresh->source = weights;
      if (!constant) fresh->bytes.assign(bytes, bytes + size);
      fresh->memory = dnnl::memory(chosen_, Engine());
      dnnl::memory given(user_, Engine(), const_cast<void*>(weights));
      Execute(reorder_, given, fresh->memory);
      copy_ = std::move(fresh);
    }
    return copy_->memory;  // a handle: it keeps the buffer alive while the caller runs
  }

 private:
  struct Copy {
    const void* source = nullptr;      // the buffer they came from
    std::vector<unsigned char> bytes;  // its bytes, unless the weights are constant
    dnnl::memory memory;
  };

  dnnl::memory::desc user_, chosen_;
  dnnl::reorder reorder_;
  std::mutex mutex_;
  std::unique_ptr<const Copy> copy_;
};

// One kernel's ReorderedWeights, one per pair of layouts: its primitives
// for several shapes (a batch or a sequence length that varies) that chose
// the same layout for the same weights share one copy of them.
class WeightsPool {
 public:
  std::shared_ptr<ReorderedWeights> For(const dnnl::memory::desc& user, const dnnl::memory::desc& chosen) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& weights : pool_) {
      if (weights->user() == user && weights->chosen() == chosen) return weights;
    }
    pool_.push_back(std::make_shared<ReorderedWeights>(user, chosen));
    return pool_.back();
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<ReorderedWeights>> pool_;
};

// f32 data [n, c, h, w] in the NCHW or NHWC layout.
inline dnnl::memory::desc DataDesc(int64_t n, int64_t c, int64_t h, int64_t w, bool nchw) {
  using tag = dnnl::memory::format_tag;
  return dnnl::memory::desc({n, c, h, w}, dnnl::memory::data_type::f32, nchw ? tag::nchw : tag::nhwc);
}

// Memory of |desc| in a temp of the kernel (released after the compute).
inline dnnl::memory TempMemory(Context& ctx, const dnnl::memory::desc& desc) {
  const auto floats = static_cast<int64_t>((desc.get_size() + sizeof(float) - 1) / sizeof(float));
  Tensor temp = ctx.allocate_temp(WEFT_DTYPE_F32, {floats});
  return dnnl::memory(desc, Engine(), temp.data);
}

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_DNNL_UTIL_H_
