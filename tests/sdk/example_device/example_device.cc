// An example device plugin for Weft, built out of tree against the SDK.
//
// The EXAMPLE device keeps its memory to itself: its buffers are not
// host-visible, so the host moves data with the copy functions, exactly as
// it would for a GPU. Its copies and kernels run on the calling thread and
// have finished when they return, so its streams and events are the SDK's
// inline ones (weft/sdk/device.h): the simplest correct streams.
//
// Its kernels (f32 Add, Mul, Relu, MatMul, BiasAdd: enough for the dense
// layers of an MLP) are classes registered with the SDK's kernel layer
// (weft/sdk/kernel.h); docs/plugins.md, "Writing kernels", walks through
// them.
//
// Everything a real device plugin needs is here; copy this file to start
// one. It sees nothing of Weft but the SDK (weft/...).
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "weft/sdk/device.h"
#include "weft/sdk/kernel.h"
#include "weft/sdk/plugin.h"

namespace {

constexpr uint64_t kMemoryBytes = uint64_t{1} << 30;  // what the device says it has

struct Buffer {
  std::vector<unsigned char> bytes;
};

Buffer* AsBuffer(weft_buffer_t b) { return reinterpret_cast<Buffer*>(b); }

void CheckRange(const Buffer* b, uint64_t offset, uint64_t size) {
  if (b == nullptr || offset > b->bytes.size() || size > b->bytes.size() - offset) {
    throw weft::sdk::Error(WEFT_OUT_OF_RANGE, "copy outside the buffer");
  }
}

weft_status_t Count(int32_t* out) {
  return weft::sdk::Guard([&] { *out = 1; });
}

weft_status_t Open(int32_t ordinal, weft_device_t* out) {
  return weft::sdk::Guard([&] {
    if (ordinal != 0) throw weft::sdk::Error(WEFT_NOT_FOUND, "only /device:EXAMPLE:0 exists");
    static int device_tag = 0;
    *out = reinterpret_cast<weft_device_t>(&device_tag);
  });
}

void Close(weft_device_t) {}

weft_status_t Properties(weft_device_t, weft_device_properties_t* out) {
  return weft::sdk::Guard([&] {
    auto props = weft::sdk::Make<weft_device_properties_t>();
    props.model = "Example device";
    props.vendor = "Weft SDK example";
    props.memory_bytes = kMemoryBytes;
    // What std::vector's storage guarantees: every dtype's elements.
    props.alignment = alignof(std::max_align_t);
    props.host_visible = 0;
    props.compute_units = 1;
    weft::sdk::FillOut(out, props);
  });
}

// A buffer larger than the device's memory is refused before anything is
// allocated (RESOURCE_EXHAUSTED, as weft_device.h asks).
weft_status_t Alloc(weft_device_t, uint64_t size, weft_buffer_t* out) {
  return weft::sdk::Guard([&] {
    if (size > kMemoryBytes) {
      throw weft::sdk::Error(WEFT_RESOURCE_EXHAUSTED,
                             "a buffer of " + std::to_string(size) + " bytes is more than the example device's 1 GiB");
    }
    *out = reinterpret_cast<weft_buffer_t>(new Buffer{std::vector<unsigned char>(size)});
  });
}

void Free(weft_device_t, weft_buffer_t buffer) { delete AsBuffer(buffer); }

weft_status_t H2D(weft_device_t, weft_stream_t, const void* src, weft_buffer_t dst, uint64_t off, uint64_t size) {
  return weft::sdk::Guard([&] {
    CheckRange(AsBuffer(dst), off, size);
    if (size > 0) std::memcpy(AsBuffer(dst)->bytes.data() + off, src, size);
  });
}

weft_status_t D2H(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t off, void* dst, uint64_t size) {
  return weft::sdk::Guard([&] {
    CheckRange(AsBuffer(src), off, size);
    if (size > 0) std::memcpy(dst, AsBuffer(src)->bytes.data() + off, size);
  });
}

weft_status_t D2D(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t soff, weft_buffer_t dst, uint64_t doff,
                  uint64_t size) {
  return weft::sdk::Guard([&] {
    CheckRange(AsBuffer(src), soff, size);
    CheckRange(AsBuffer(dst), doff, size);
    if (size > 0) std::memmove(AsBuffer(dst)->bytes.data() + doff, AsBuffer(src)->bytes.data() + soff, size);
  });
}

// --- Kernels ----------------------------------------------------------------
//
// A kernel's tensors live in this device's memory: |data| is NULL, and the
// elements start |offset| bytes into the plugin's own Buffer. (A host-memory
// arg would have |data| instead; these kernels take none.)

using weft::sdk::Dims;
using weft::sdk::KernelContext;
using weft::sdk::KernelInit;
using weft::sdk::Tensor;

float* Elements(const Tensor& t) {
  if (t.byte_size == 0) return nullptr;
  if (t.data != nullptr) return static_cast<float*>(t.data);
  return reinterpret_cast<float*>(t.buffer_as<Buffer>()->bytes.data() + t.offset);
}

// Add and Mul with NumPy broadcasting: the SDK's PlanBroadcast gives, for
// the output's (merged) dimensions, each operand's element strides.
template <class Op>
class BinaryKernel {
 public:
  explicit BinaryKernel(const KernelInit&) {}
  void Compute(KernelContext& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    const Tensor z = ctx.allocate_output(0, weft::sdk::BroadcastDims(a.dims, b.dims));
    if (z.num_elements == 0) return;
    const weft::sdk::BroadcastLayout plan = weft::sdk::PlanBroadcast(z.dims, {&a.dims, &b.dims});
    const float* x = Elements(a);
    const float* y = Elements(b);
    float* out = Elements(z);
    const std::size_t rank = plan.dims.size();
    std::vector<int64_t> index(rank, 0);
    int64_t ia = 0, ib = 0;
    for (int64_t i = 0; i < z.num_elements; ++i) {
      out[i] = Op()(x[ia], y[ib]);
      // Step the index like an odometer, moving both operands' offsets.
      for (std::size_t d = rank; d-- > 0;) {
        ia += plan.strides[0][d];
        ib += plan.strides[1][d];
        if (++index[d] < plan.dims[d]) break;
        ia -= plan.strides[0][d] * plan.dims[d];
        ib -= plan.strides[1][d] * plan.dims[d];
        index[d] = 0;
      }
    }
  }
};

struct Plus {
  float operator()(float x, float y) const { return x + y; }
};
struct Times {
  float operator()(float x, float y) const { return x * y; }
};

class ReluKernel {
 public:
  explicit ReluKernel(const KernelInit&) {}
  void Compute(KernelContext& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.allocate_output(0, x.dims);
    const float* in = Elements(x);
    float* out = Elements(y);
    // max(x, 0) but NaN stays NaN, as NumPy's maximum.
    for (int64_t i = 0; i < y.num_elements; ++i) out[i] = in[i] < 0 ? 0.0f : in[i];
  }
};

// C = op(A) op(B) for matrices, op transposing when the attr says so.
class MatMulKernel {
 public:
  explicit MatMulKernel(const KernelInit& init)
      : transpose_a_(init.Bool("transpose_a")), transpose_b_(init.Bool("transpose_b")) {}
  void Compute(KernelContext& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    weft::sdk::RequireRank(a, 2, "a");
    weft::sdk::RequireRank(b, 2, "b");
    const int64_t m = a.dim(transpose_a_ ? 1 : 0), k = a.dim(transpose_a_ ? 0 : 1);
    const int64_t kb = b.dim(transpose_b_ ? 1 : 0), n = b.dim(transpose_b_ ? 0 : 1);
    if (k != kb) {
      weft::sdk::Fail("inner dimensions differ: a is ", weft::sdk::DimsString(a.dims), ", b is ",
                      weft::sdk::DimsString(b.dims));
    }
    const Tensor c = ctx.allocate_output(0, {m, n});
    const float* x = Elements(a);
    const float* y = Elements(b);
    float* z = Elements(c);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += x[transpose_a_ ? p * m + i : i * k + p] * y[transpose_b_ ? j * k + p : p * n + j];
        }
        z[i * n + j] = sum;
      }
    }
  }

 private:
  bool transpose_a_, transpose_b_;
};

// value + bias along the last dimension. Only NHWC (channels last): a node
// asking for NCHW is refused at placement (Query), so the placer puts it on
// a device that has it.
class BiasAddKernel {
 public:
  explicit BiasAddKernel(const KernelInit&) {}
  static void Query(const weft::sdk::KernelInit& init, weft_kernel_query_t& out) {
    if (init.String("data_format") != "NHWC") {
      out.unsupported = 1;
      out.reason = "the example device's BiasAdd supports data_format NHWC only";
    }
  }
  void Compute(KernelContext& ctx) {
    const Tensor value = ctx.input(0), bias = ctx.input(1);
    weft::sdk::RequireRank(bias, 1, "bias");
    if (value.rank() < 1 || value.dim(value.rank() - 1) != bias.dim(0)) {
      weft::sdk::Fail("bias of shape ", weft::sdk::DimsString(bias.dims),
                      " does not match the last dimension of value ", weft::sdk::DimsString(value.dims));
    }
    const Tensor out = ctx.allocate_output(0, value.dims);
    const float* v = Elements(value);
    const float* b = Elements(bias);
    float* o = Elements(out);
    const int64_t channels = bias.dim(0);
    for (int64_t i = 0; i < out.num_elements; ++i) o[i] = v[i] + b[i % channels];
  }
};

const weft::sdk::KernelRegistry& Kernels() {
  static const weft::sdk::KernelRegistry registry = [] {
    weft::sdk::KernelRegistry r;
    const std::pair<const char*, weft_dtype_t> f32{"T", WEFT_DTYPE_F32};
    r.Add<BinaryKernel<Plus>>("Add", {f32});
    r.Add<BinaryKernel<Times>>("Mul", {f32});
    r.Add<ReluKernel>("Relu", {f32});
    r.Add<MatMulKernel>("MatMul", {f32});
    r.Add<BiasAddKernel>("BiasAdd", {f32});
    return r;
  }();
  return registry;
}

const weft_device_plugin_t kDevice = [] {
  auto t = weft::sdk::Make<weft_device_plugin_t>();
  t.device_type = "EXAMPLE";
  t.device_count = Count;
  t.device_open = Open;
  t.device_close = Close;
  t.device_properties = Properties;
  t.buffer_alloc = Alloc;
  t.buffer_free = Free;
  // Copies and kernels finish before they return: no stream has pending
  // work, no event is ever unreached.
  weft::sdk::SetInlineStreams(t);
  t.copy_host_to_device = H2D;
  t.copy_device_to_host = D2H;
  t.copy_device_to_device = D2D;
  t.kernels = Kernels().data();
  t.num_kernels = Kernels().size();
  return t;
}();

const weft_plugin_t* Describe() {
  static const weft_plugin_t plugin = [] {
    weft_plugin_t p =
        weft::sdk::DescribePlugin("example", "1.0.0", "An example device with its own memory", WEFT_PLUGIN_DEVICE);
    p.device = &kDevice;
    return p;
  }();
  return &plugin;
}

}  // namespace

WEFT_SDK_DEFINE_PLUGIN(Describe)
