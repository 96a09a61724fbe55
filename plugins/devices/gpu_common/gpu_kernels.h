// The kernel framework of the cuda and hip plugins: C++ kernel classes over
// the SDK's C kernel ABI whose work is enqueued on the node's stream.
//
//   class NegKernel {
//    public:
//     explicit NegKernel(const InitContext&) {}
//     void Compute(Context& ctx) {
//       const Tensor x = ctx.input(0);
//       const Tensor y = ctx.allocate_output(0, x.dims);
//       ctx.Check(launch::Unary(launch::UnaryOp::kNeg, x.f32(), y.f32(), x.num_elements,
//                               ctx.stream()), "Neg");
//     }
//   };
//   registry.Add<NegKernel>("Neg", {{"T", WEFT_DTYPE_F32}});
//
// Everything throws weft::sdk::Error; the registry runs every entry point
// inside the SDK's guard. Tensors live in device memory.
#ifndef WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_KERNELS_H_
#define WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_KERNELS_H_

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpu_device.h"
#include "weft/sdk/guard.h"
#include "weft/sdk/status.h"
#include "weft/weft_plugin.h"

namespace weft::gpu {

using Dims = std::vector<int64_t>;

template <class... Args>
std::string Str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

std::string DimsString(const Dims& dims);

// Throws an INVALID_ARGUMENT error made of |args|.
template <class... Args>
[[noreturn]] void Fail(const Args&... args) {
  throw sdk::Error(WEFT_INVALID_ARGUMENT, Str(args...));
}

// A tensor lent by the host: dtype, shape and the device address of its
// first element (null for an empty tensor).
struct Tensor {
  weft_dtype_t dtype = WEFT_DTYPE_INVALID;
  Dims dims;
  int64_t num_elements = 0;
  void* ptr = nullptr;

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t dim(int i) const { return dims[static_cast<std::size_t>(i)]; }
  float* f32() const { return static_cast<float*>(ptr); }
};

class InitContext {
 public:
  InitContext(Device* device, const weft_kernel_init_t* init) : device_(device), init_(init) {}
  Device& device() const { return *device_; }
  const char* node_name() const;
  bool Bool(const char* name) const;
  std::string String(const char* name) const;
  std::vector<int64_t> Ints(const char* name) const;
  weft_dtype_t input_dtype(int i) const;

 private:
  Device* device_;
  const weft_kernel_init_t* init_;
};

// The statically known shape of input |index| at creation or placement:
// false when the rank is unknown; unknown sizes are -1.
bool KnownShape(const weft_kernel_init_t* init, int index, Dims* dims);

class Context {
 public:
  Context(Device* device, weft_kernel_context_t* ctx) : device_(device), ctx_(ctx) {}
  Device& device() const { return *device_; }
  gpuStream_t stream() const;
  Tensor input(int i) const;
  Tensor allocate_output(int i, const Dims& dims);
  Tensor allocate_temp(weft_dtype_t dtype, const Dims& dims);
  const char* node_name() const;
  // Throws INTERNAL "<what> in <node> on <device>: <runtime error>" unless
  // |err| is success.
  void Check(gpuError_t err, const char* what) const;

 private:
  Device* device_;
  weft_kernel_context_t* ctx_;
};

// The Device behind a weft_device_t of this plugin (gpu_table.cc).
Device* DeviceOf(weft_device_t device);

// Kernel definitions handed to the host, with storage for their strings.
class KernelRegistry {
 public:
  using Constraints = std::initializer_list<std::pair<const char*, weft_dtype_t>>;

  using QueryFn = weft_status_t (*)(weft_device_t, const weft_kernel_init_t*, weft_kernel_query_t*);

  // |query| (optional) refuses shapes the kernel cannot run at placement,
  // so that the node falls back to another device.
  template <class K>
  void Add(const char* op, Constraints constraints, uint32_t flags = 0, QueryFn query = nullptr) {
    AddRaw(op, constraints, flags, &Create<K>, &Destroy<K>, &Compute<K>, query);
  }

  const weft_kernel_def_t* data() const { return defs_.data(); }
  std::size_t size() const { return defs_.size(); }

 private:
  template <class K>
  struct Holder {
    Device* device;
    K kernel;
  };
  template <class K>
  static weft_status_t Create(weft_device_t device, const weft_kernel_init_t* init, void** out) {
    return sdk::Guard([&] {
      Device* d = DeviceOf(device);
      *out = new Holder<K>{d, K(InitContext(d, init))};
    });
  }
  template <class K>
  static void Destroy(void* state) {
    delete static_cast<Holder<K>*>(state);
  }
  template <class K>
  static weft_status_t Compute(void* state, weft_kernel_context_t* ctx) {
    return sdk::Guard([&] {
      auto* holder = static_cast<Holder<K>*>(state);
      holder->device->Activate();
      Context context(holder->device, ctx);
      holder->kernel.Compute(context);
    });
  }

  void AddRaw(const char* op, Constraints constraints, uint32_t flags,
              weft_status_t (*create)(weft_device_t, const weft_kernel_init_t*, void**),
              void (*destroy)(void*), weft_status_t (*compute)(void*, weft_kernel_context_t*),
              QueryFn query);

  std::vector<weft_kernel_def_t> defs_;
  std::deque<std::vector<const char*>> names_;
  std::deque<std::vector<weft_dtype_t>> dtypes_;
};

// The plugin's kernels: defined by each plugin (cuda_kernels.cc,
// hip_kernels.cc), which adds the shared families below and its own.
const KernelRegistry& Kernels();

// Shared families (gpu_common/kernels.cc), over the launchers of
// gpu_launch.h.
void RegisterElementwiseKernels(KernelRegistry& r);
void RegisterReductionKernels(KernelRegistry& r);
void RegisterNnKernels(KernelRegistry& r);

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_KERNELS_H_
