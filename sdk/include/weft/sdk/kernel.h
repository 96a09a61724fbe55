// Weft SDK for C++ plugins: kernels as C++ classes over the C kernel ABI
// (weft/weft_kernel.h). Header-only, C++17, nothing of Weft but the SDK.
//
// A kernel is a class built once per node from its attrs and called once
// per step. A registry turns classes into the weft_kernel_def_t list a
// device plugin hands the host (weft_device_plugin_t.kernels):
//
//   class AddF32 {
//    public:
//     explicit AddF32(const weft::sdk::KernelInit&) {}
//     void Compute(weft::sdk::KernelContext& ctx) {
//       const weft::sdk::Tensor a = ctx.input(0), b = ctx.input(1);
//       weft::sdk::RequireSameShape(a, b, "Add on the ADD device (no broadcasting)");
//       const weft::sdk::Tensor c = ctx.allocate_output(0, a.dims);
//       ...  // a.buffer, a.offset: the plugin's own buffer (see Tensor)
//     }
//   };
//
//   const weft::sdk::KernelRegistry& Kernels() {
//     static const weft::sdk::KernelRegistry registry = [] {
//       weft::sdk::KernelRegistry r;
//       r.Add<AddF32>("Add", {{"T", WEFT_DTYPE_F32}});
//       return r;
//     }();
//     return registry;
//   }
//   ...
//   t.kernels = Kernels().data();
//   t.num_kernels = Kernels().size();
//
// (tests/sdk/add_device/add_device.cc, whole.)
//
// Everything here throws weft::sdk::Error on failure, and the registry
// runs every entry point inside weft::sdk::Guard, so a throw in a kernel's
// constructor fails graph preparation naming the node, and a throw in
// Compute fails the step naming the node. docs/plugins.md ("Writing
// kernels") walks through a whole kernel.
//
// A plugin with more to offer its kernels (a stream type, a device class,
// another tensor representation) derives from KernelInit and
// BasicKernelContext and registers with BasicKernelRegistry<its types>.
#ifndef WEFT_SDK_KERNEL_H_
#define WEFT_SDK_KERNEL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/sdk/guard.h"
#include "weft/sdk/host.h"
#include "weft/sdk/status.h"
#include "weft/weft_plugin.h"

namespace weft::sdk {

using Dims = std::vector<int64_t>;

// --- Messages and errors ---------------------------------------------------

// Its arguments written one after another with operator<<.
template <class... Args>
std::string Str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// "[2,3]"; "[]" for a scalar.
inline std::string DimsString(const Dims& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(std::to_string(dims[i]));
  }
  return out + "]";
}

// "f32"; "?" for a number that is no dtype.
inline const char* DtypeName(weft_dtype_t dtype) {
  const char* name = weft_dtype_name(dtype);
  return name != nullptr ? name : "?";
}

// Throws an INVALID_ARGUMENT error made of |args|. The host adds the node's
// name and op, so a message says what is wrong, not where.
template <class... Args>
[[noreturn]] void Fail(const Args&... args) {
  throw Error(WEFT_INVALID_ARGUMENT, Str(args...));
}

// Throws an error with |code| made of |args|.
template <class... Args>
[[noreturn]] void FailWith(weft_code_t code, const Args&... args) {
  throw Error(code, Str(args...));
}

namespace internal {

inline const weft_kernel_api_t* KernelApi() {
  const weft_kernel_api_t* api = host()->kernel;
  if (api == nullptr) throw Error(WEFT_FAILED_PRECONDITION, "the host offers no kernel services");
  return api;
}

inline weft_tensor_t EmptyView() {
  weft_tensor_t v{};
  v.struct_size = sizeof v;
  return v;
}

}  // namespace internal

// --- Tensors ---------------------------------------------------------------

// A tensor the host lends a kernel, for one compute.
//
// Where its elements are depends on the memory:
//  - host-visible memory (the device's properties say host_visible, as the
//    CPU's do) and host-memory args: |data| is the address of the first
//    element, and as<T>() reads it;
//  - a device's own memory: |data| is null; |buffer| is the plugin's own
//    handle, the one its buffer_alloc returned (buffer_as<B>() casts it
//    back), and the elements start |offset| bytes into it.
// An empty tensor (byte_size 0) has neither.
struct Tensor {
  weft_dtype_t dtype = WEFT_DTYPE_INVALID;
  Dims dims;
  int64_t num_elements = 0;
  uint64_t byte_size = 0;
  void* data = nullptr;
  weft_buffer_t buffer = nullptr;
  uint64_t offset = 0;

  Tensor() = default;
  explicit Tensor(const weft_tensor_t& v)
      : dtype(v.dtype),
        dims(v.dims, v.dims + v.rank),
        num_elements(v.num_elements),
        byte_size(v.byte_size),
        data(v.data),
        buffer(v.buffer),
        offset(v.offset) {}

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t dim(int i) const { return dims[static_cast<std::size_t>(i)]; }
  // The elements at |data|, as T (unchecked: see RequireDtype).
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // The plugin's buffer object behind |buffer|.
  template <class B>
  B* buffer_as() const {
    return reinterpret_cast<B*>(buffer);
  }
};

// --- Checks ----------------------------------------------------------------
//
// Each throws INVALID_ARGUMENT naming |what| (an input's name, "x") and
// what it got; the host prefixes the node.

template <class T>
void RequireDtype(const T& t, weft_dtype_t dtype, const char* what) {
  if (t.dtype != dtype) Fail(what, " must be ", DtypeName(dtype), ", got ", DtypeName(t.dtype));
}

template <class T>
void RequireRank(const T& t, int rank, const char* what) {
  if (t.rank() != rank) Fail(what, " must have rank ", rank, ", got shape ", DimsString(t.dims));
}

template <class A, class B>
void RequireSameShape(const A& a, const B& b, const char* what) {
  if (a.dims != b.dims) Fail(what, ": shapes ", DimsString(a.dims), " and ", DimsString(b.dims), " differ");
}

// The NumPy broadcast of two shapes; throws naming both.
inline Dims BroadcastDims(const Dims& a, const Dims& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      Fail("shapes ", DimsString(a), " and ", DimsString(b), " cannot be broadcast together");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// NumPy broadcasting of operands onto |out| as flat index arithmetic: the
// output's dimensions, merged where every operand walks them as one run
// and without those of size 1 ([1] for a single element), and each
// operand's element strides over them (0 where it is broadcast). Throws
// when an operand does not broadcast to |out|.
struct BroadcastLayout {
  Dims dims;
  std::vector<Dims> strides;  // one per operand, dims.size() entries each
};

inline BroadcastLayout PlanBroadcast(const Dims& out, const std::vector<const Dims*>& operands) {
  const std::size_t rank = out.size();
  const std::size_t n = operands.size();
  std::vector<Dims> aligned(n, Dims(rank, 0));
  for (std::size_t k = 0; k < n; ++k) {
    const Dims& in = *operands[k];
    if (in.size() > rank) Fail("shape ", DimsString(in), " has more dimensions than ", DimsString(out));
    int64_t stride = 1;
    for (std::size_t j = 0; j < in.size(); ++j) {
      const std::size_t i = rank - 1 - j;
      const int64_t d = in[in.size() - 1 - j];
      if (d != out[i] && d != 1) Fail("shape ", DimsString(in), " does not broadcast to ", DimsString(out));
      aligned[k][i] = d == 1 ? 0 : stride;
      stride *= d;
    }
  }
  BroadcastLayout plan;
  plan.strides.resize(n);
  for (std::size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    bool merge = !plan.dims.empty();
    for (std::size_t k = 0; k < n && merge; ++k) merge = plan.strides[k].back() == aligned[k][i] * out[i];
    if (merge) {
      plan.dims.back() *= out[i];
      for (std::size_t k = 0; k < n; ++k) plan.strides[k].back() = aligned[k][i];
    } else {
      plan.dims.push_back(out[i]);
      for (std::size_t k = 0; k < n; ++k) plan.strides[k].push_back(aligned[k][i]);
    }
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    for (auto& s : plan.strides) s.push_back(0);
  }
  return plan;
}

// A reduction of a row-major tensor of shape |in| over the dimensions
// flagged in |reduce|, as two index spaces with the input's element
// strides: the kept dimensions (the output, row-major) and the reduced
// ones, each merged where contiguous and without sizes of 1 ([1] with
// stride 0 when a side has none).
struct ReduceLayout {
  Dims kept_dims, kept_strides;
  Dims reduced_dims, reduced_strides;
  int64_t num_out = 1;
  int64_t num_reduced = 1;
};

inline ReduceLayout PlanReduce(const Dims& in, const std::vector<bool>& reduce) {
  if (reduce.size() != in.size()) {
    FailWith(WEFT_INTERNAL, "a reduction of shape ", DimsString(in), " given ", reduce.size(), " flags");
  }
  ReduceLayout plan;
  const auto add = [](Dims& dims, Dims& strides, int64_t d, int64_t s) {
    if (d == 1) return;
    if (!dims.empty() && strides.back() == s * d) {
      dims.back() *= d;
      strides.back() = s;
    } else {
      dims.push_back(d);
      strides.push_back(s);
    }
  };
  Dims strides(in.size(), 1);
  for (std::size_t i = in.size(); i-- > 1;) strides[i - 1] = strides[i] * in[i];
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (reduce[i]) {
      add(plan.reduced_dims, plan.reduced_strides, in[i], strides[i]);
      plan.num_reduced *= in[i];
    } else {
      add(plan.kept_dims, plan.kept_strides, in[i], strides[i]);
      plan.num_out *= in[i];
    }
  }
  for (Dims* side : {&plan.kept_dims, &plan.reduced_dims}) {
    if (side->empty()) side->push_back(1);
  }
  if (plan.kept_strides.empty()) plan.kept_strides.push_back(0);
  if (plan.reduced_strides.empty()) plan.reduced_strides.push_back(0);
  return plan;
}

// --- At creation -----------------------------------------------------------

// What a kernel's constructor sees: its device, the node's name, op, attrs
// and dtypes. Getters of attrs throw when the attr is missing or of
// another type (the host's message names the node and the attr).
class KernelInit {
 public:
  KernelInit(weft_device_t device, const weft_kernel_init_t* init) : device_(device), init_(init) {}

  // The device the kernel was created for, as the plugin's device_open
  // returned it; device_as<D>() casts it back.
  weft_device_t device_handle() const { return device_; }
  template <class D>
  D& device_as() const {
    return *reinterpret_cast<D*>(device_);
  }
  const weft_kernel_init_t* raw() const { return init_; }

  const char* node_name() const { return internal::KernelApi()->init_node_name(init_); }
  const char* op() const { return internal::KernelApi()->init_op(init_); }
  int num_inputs() const { return internal::KernelApi()->init_num_inputs(init_); }
  int num_outputs() const { return internal::KernelApi()->init_num_outputs(init_); }
  weft_dtype_t input_dtype(int i) const { return internal::KernelApi()->init_input_dtype(init_, i); }
  weft_dtype_t output_dtype(int i) const { return internal::KernelApi()->init_output_dtype(init_, i); }
  // The statically known shape of input |i|: false when the rank is
  // unknown; a dimension is -1 when its size is unknown.
  bool input_shape(int i, Dims* dims) const {
    int32_t rank = -1;
    const int64_t* d = nullptr;
    ThrowIfError(internal::KernelApi()->init_input_shape(init_, i, &rank, &d));
    if (rank < 0) return false;
    dims->assign(d, d + rank);
    return true;
  }

  int64_t Int(const char* name) const {
    int64_t v = 0;
    ThrowIfError(internal::KernelApi()->attr_int(init_, name, &v));
    return v;
  }
  double Float(const char* name) const {
    double v = 0;
    ThrowIfError(internal::KernelApi()->attr_float(init_, name, &v));
    return v;
  }
  bool Bool(const char* name) const {
    weft_bool_t v = 0;
    ThrowIfError(internal::KernelApi()->attr_bool(init_, name, &v));
    return v != 0;
  }
  weft_dtype_t Type(const char* name) const {
    weft_dtype_t v = WEFT_DTYPE_INVALID;
    ThrowIfError(internal::KernelApi()->attr_dtype(init_, name, &v));
    return v;
  }
  std::string String(const char* name) const {
    const char* data = nullptr;
    size_t size = 0;
    ThrowIfError(internal::KernelApi()->attr_string(init_, name, &data, &size));
    return std::string(data, size);
  }
  std::vector<int64_t> Ints(const char* name) const {
    const int64_t* data = nullptr;
    size_t count = 0;
    ThrowIfError(internal::KernelApi()->attr_int_list(init_, name, &data, &count));
    return std::vector<int64_t>(data, data + count);
  }
  std::vector<double> Floats(const char* name) const {
    const double* data = nullptr;
    size_t count = 0;
    ThrowIfError(internal::KernelApi()->attr_float_list(init_, name, &data, &count));
    return std::vector<double>(data, data + count);
  }

 private:
  weft_device_t device_;
  const weft_kernel_init_t* init_;
};

// A T (a kernel, or an op a kernel holds) made from the creation context
// |init| when T has a constructor that takes it, and default-constructed
// otherwise: the registry makes kernels this way, so a kernel without
// attrs needs no constructor.
template <class T, class InitT>
T MakeFromInit(const InitT& init) {
  if constexpr (std::is_constructible_v<T, const InitT&>) {
    return T(init);
  } else {
    static_assert(std::is_default_constructible_v<T>, "T is made from the creation context, or default-constructed");
    (void)init;
    return T();
  }
}

// --- During compute --------------------------------------------------------

// What Compute sees: the node's inputs, outputs, scratch memory, variables
// and stream, for one step. |TensorT| is how tensors are handed to the
// kernel: Tensor, or a plugin's own type constructible from a
// weft_tensor_t.
template <class TensorT>
class BasicKernelContext {
 public:
  BasicKernelContext(weft_device_t device, weft_kernel_context_t* ctx) : device_(device), ctx_(ctx) {}

  weft_device_t device_handle() const { return device_; }
  template <class D>
  D& device_as() const {
    return *reinterpret_cast<D*>(device_);
  }
  weft_kernel_context_t* raw() const { return ctx_; }
  // The stream the kernel's work goes on, as the plugin's stream_create
  // returned it; stream_as<S>() casts it back.
  weft_stream_t stream_handle() const { return internal::KernelApi()->stream(ctx_); }
  template <class S>
  S& stream_as() const {
    weft_stream_t s = stream_handle();
    if (s == nullptr) throw Error(WEFT_INTERNAL, "the host gave the kernel no stream");
    return *reinterpret_cast<S*>(s);
  }

  const char* node_name() const { return internal::KernelApi()->node_name(ctx_); }
  int num_inputs() const { return internal::KernelApi()->num_inputs(ctx_); }
  int num_outputs() const { return internal::KernelApi()->num_outputs(ctx_); }
  int64_t step_id() const { return internal::KernelApi()->step_id(ctx_); }
  bool is_cancelled() const { return internal::KernelApi()->is_cancelled(ctx_) != 0; }

  // Input |i|, lent until the compute returns and the stream work it
  // enqueued has run.
  TensorT input(int i) const {
    weft_tensor_t v = internal::EmptyView();
    ThrowIfError(internal::KernelApi()->input(ctx_, i, &v));
    return TensorT(v);
  }
  // Output |i| with the op's dtype for it and shape |dims|, on the
  // kernel's device (in host memory for a host-memory arg).
  TensorT allocate_output(int i, const Dims& dims) {
    weft_tensor_t v = internal::EmptyView();
    ThrowIfError(internal::KernelApi()->allocate_output(ctx_, i, static_cast<int32_t>(dims.size()), dims.data(), &v));
    return TensorT(v);
  }
  // Output |output| shares input |input|'s buffer and shape.
  void forward(int input, int output) { ThrowIfError(internal::KernelApi()->forward_input(ctx_, input, output)); }
  // The same with a new shape of as many elements.
  void forward_reshaped(int input, int output, const Dims& dims) {
    ThrowIfError(internal::KernelApi()->forward_input_reshaped(ctx_, input, output, static_cast<int32_t>(dims.size()),
                                                               dims.data()));
  }
  // Scratch memory on the kernel's device, released once the compute has
  // returned and the stream work it enqueued has run.
  TensorT allocate_temp(weft_dtype_t dtype, const Dims& dims) {
    weft_tensor_t v = internal::EmptyView();
    ThrowIfError(internal::KernelApi()->allocate_temp(ctx_, dtype, static_cast<int32_t>(dims.size()), dims.data(), &v));
    return TensorT(v);
  }
  // The variable behind resource input |i|, locked until the compute
  // returns: shared to read it, exclusive to update it in place.
  TensorT lock_variable(int i, bool exclusive) {
    weft_tensor_t v = internal::EmptyView();
    ThrowIfError(internal::KernelApi()->variable_lock(ctx_, i, exclusive ? 1 : 0, &v));
    return TensorT(v);
  }
  std::string variable_name(int i) const {
    const char* name = internal::KernelApi()->variable_name(ctx_, i);
    return name != nullptr ? name : "?";
  }

 private:
  weft_device_t device_;
  weft_kernel_context_t* ctx_;
};

using KernelContext = BasicKernelContext<Tensor>;

// --- The registry ----------------------------------------------------------

namespace internal {
template <class K, class InitT, class = void>
struct HasQuery : std::false_type {};
template <class K, class InitT>
struct HasQuery<K, InitT,
                std::void_t<decltype(K::Query(std::declval<const InitT&>(), std::declval<weft_kernel_query_t&>()))>>
    : std::true_type {};
}  // namespace internal

// The kernel definitions a device plugin hands the host, with storage for
// the strings and arrays they point to. Build it once (a function-local
// static) and give the host data() and size().
//
// A kernel class K is constructed from const InitT& (a kernel without attrs
// may leave its constructor out) and has void Compute(ContextT&). It may
// also have
//   static void Query(const InitT&, weft_kernel_query_t& out);
// to tell the placer it cannot run a node as shaped (out.unsupported and
// out.reason) or what it costs (out.cost_ns); without one, set_query's
// function (if any) answers.
template <class InitT = KernelInit, class ContextT = KernelContext>
class BasicKernelRegistry {
 public:
  using Constraints = std::initializer_list<std::pair<const char*, weft_dtype_t>>;
  using QueryFn = weft_status_t (*)(weft_device_t, const weft_kernel_init_t*, weft_kernel_query_t*);

  // Registers K for |op| where each type attr of |constraints| has its
  // dtype. |flags| are WEFT_KERNEL_* (INLINE for kernels of a few hundred
  // nanoseconds); |host_memory_args| name args kept in host memory even on
  // a device with its own (a Reshape's shape).
  template <class K>
  void Add(const char* op, Constraints constraints, uint32_t flags = 0,
           std::initializer_list<const char*> host_memory_args = {}) {
    weft_kernel_def_t& def = AddDef(op, constraints, flags, host_memory_args);
    def.create = &Create<K>;
    def.destroy = &Destroy<K>;
    def.compute = &Compute<K>;
    if constexpr (internal::HasQuery<K, InitT>::value) {
      def.query = &Query<K>;
    } else {
      def.query = query_;
    }
  }

  // The query of kernels added from now on that have none of their own.
  void set_query(QueryFn query) { query_ = query; }

  const weft_kernel_def_t* data() const { return defs_.empty() ? nullptr : defs_.data(); }
  std::size_t size() const { return defs_.size(); }

 private:
  template <class K>
  struct Holder {
    weft_device_t device;
    K kernel;
  };

  template <class K>
  static weft_status_t Create(weft_device_t device, const weft_kernel_init_t* init, void** out) {
    return Guard([&] { *out = new Holder<K>{device, MakeFromInit<K>(InitT(device, init))}; });
  }
  template <class K>
  static void Destroy(void* state) {
    delete static_cast<Holder<K>*>(state);
  }
  template <class K>
  static weft_status_t Compute(void* state, weft_kernel_context_t* ctx) {
    return Guard([&] {
      auto* holder = static_cast<Holder<K>*>(state);
      ContextT context(holder->device, ctx);
      holder->kernel.Compute(context);
    });
  }
  template <class K>
  static weft_status_t Query(weft_device_t device, const weft_kernel_init_t* init, weft_kernel_query_t* out) {
    return Guard([&] { K::Query(InitT(device, init), *out); });
  }

  weft_kernel_def_t& AddDef(const char* op, Constraints constraints, uint32_t flags,
                            std::initializer_list<const char*> host_args) {
    auto& names = strings_.emplace_back();
    auto& dtypes = dtypes_.emplace_back();
    for (const auto& [attr, dtype] : constraints) {
      names.push_back(attr);
      dtypes.push_back(dtype);
    }
    auto& hosts = strings_.emplace_back(host_args);
    weft_kernel_def_t def{};
    def.struct_size = sizeof def;
    def.op = op;
    def.constraint_attrs = names.empty() ? nullptr : names.data();
    def.constraint_dtypes = dtypes.empty() ? nullptr : dtypes.data();
    def.num_constraints = names.size();
    def.host_memory_args = hosts.empty() ? nullptr : hosts.data();
    def.num_host_memory_args = hosts.size();
    def.flags = flags;
    defs_.push_back(def);
    return defs_.back();
  }

  std::vector<weft_kernel_def_t> defs_;
  std::deque<std::vector<const char*>> strings_;  // deque: addresses stay put
  std::deque<std::vector<weft_dtype_t>> dtypes_;
  QueryFn query_ = nullptr;
};

using KernelRegistry = BasicKernelRegistry<>;

}  // namespace weft::sdk

#endif  // WEFT_SDK_KERNEL_H_
