// The smallest useful device plugin: memory of its own (not host-visible)
// and one kernel, f32 Add of two tensors of one shape. docs/plugins.md,
// "Writing kernels", explains each part. Built with
// -DWEFT_ADD_DEVICE_WRONG, its Add subtracts: the conformance kit's tests
// use that to check a wrong kernel is caught.
#include <cstddef>
#include <cstring>
#include <vector>

#include "weft/sdk/device.h"
#include "weft/sdk/kernel.h"
#include "weft/sdk/plugin.h"

namespace {

using weft::sdk::Guard;

constexpr uint64_t kMemory = uint64_t{1} << 30;  // what the device says it has

// The device's memory: a buffer handle is a pointer to one of these.
struct Buffer {
  std::vector<unsigned char> bytes;
};

unsigned char* At(weft_buffer_t b, uint64_t offset) { return reinterpret_cast<Buffer*>(b)->bytes.data() + offset; }
weft_status_t Copy(void* dst, const void* src, uint64_t size) {
  if (size > 0) std::memmove(dst, src, size);
  return nullptr;
}

// --- The kernel -------------------------------------------------------------

class AddF32 {
 public:
  explicit AddF32(const weft::sdk::KernelInit&) {}
  // Refuses, at placement, inputs the graph knows to differ in shape, so
  // the placer runs such a node elsewhere.
  static void Query(const weft::sdk::KernelInit& init, weft_kernel_query_t& out) {
    weft::sdk::Dims a, b;
    if (init.input_shape(0, &a) && init.input_shape(1, &b) && a != b) {
      out.unsupported = 1;
      out.reason = "the ADD device adds tensors of one shape only";
    }
  }
  void Compute(weft::sdk::KernelContext& ctx) {
    const weft::sdk::Tensor a = ctx.input(0), b = ctx.input(1);
    weft::sdk::RequireSameShape(a, b, "Add on the ADD device (no broadcasting)");
    const weft::sdk::Tensor c = ctx.allocate_output(0, a.dims);
    if (c.num_elements == 0) return;
    const auto* x = reinterpret_cast<const float*>(At(a.buffer, a.offset));
    const auto* y = reinterpret_cast<const float*>(At(b.buffer, b.offset));
    auto* z = reinterpret_cast<float*>(At(c.buffer, c.offset));
#ifdef WEFT_ADD_DEVICE_WRONG
    for (int64_t i = 0; i < c.num_elements; ++i) z[i] = x[i] - y[i];
#else
    for (int64_t i = 0; i < c.num_elements; ++i) z[i] = x[i] + y[i];
#endif
  }
};

const weft::sdk::KernelRegistry& Kernels() {
  static const weft::sdk::KernelRegistry registry = [] {
    weft::sdk::KernelRegistry r;
    r.Add<AddF32>("Add", {{"T", WEFT_DTYPE_F32}});
    return r;
  }();
  return registry;
}

// --- The device -------------------------------------------------------------

const weft_device_plugin_t kDevice = [] {
  auto t = weft::sdk::Make<weft_device_plugin_t>();
  t.device_type = "ADD";
  t.device_count = [](int32_t* n) { return Guard([&] { *n = 1; }); };
  t.device_open = [](int32_t ordinal, weft_device_t* out) {
    static char device;
    return Guard([&] {
      if (ordinal != 0) throw weft::sdk::Error(WEFT_NOT_FOUND, "only /device:ADD:0 exists");
      *out = reinterpret_cast<weft_device_t>(&device);
    });
  };
  t.device_close = [](weft_device_t) {};
  t.device_properties = [](weft_device_t, weft_device_properties_t* out) {
    return Guard([&] {
      auto p = weft::sdk::Make<weft_device_properties_t>();
      p.model = "Add-only device";
      p.memory_bytes = kMemory;
      p.alignment = alignof(std::max_align_t);
      weft::sdk::FillOut(out, p);
    });
  };
  t.buffer_alloc = [](weft_device_t, uint64_t size, weft_buffer_t* out) {
    return Guard([&] {
      if (size > kMemory) throw weft::sdk::Error(WEFT_RESOURCE_EXHAUSTED, "more than the ADD device's 1 GiB");
      *out = reinterpret_cast<weft_buffer_t>(new Buffer{std::vector<unsigned char>(size)});
    });
  };
  t.buffer_free = [](weft_device_t, weft_buffer_t b) { delete reinterpret_cast<Buffer*>(b); };
  weft::sdk::SetInlineStreams(t);  // copies and kernels finish before returning
  t.copy_host_to_device = [](weft_device_t, weft_stream_t, const void* src, weft_buffer_t dst, uint64_t at,
                             uint64_t size) { return Copy(At(dst, at), src, size); };
  t.copy_device_to_host = [](weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t at, void* dst, uint64_t size) {
    return Copy(dst, At(src, at), size);
  };
  t.copy_device_to_device = [](weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t from, weft_buffer_t dst,
                               uint64_t to, uint64_t size) { return Copy(At(dst, to), At(src, from), size); };
  t.kernels = Kernels().data();
  t.num_kernels = Kernels().size();
  return t;
}();

const weft_plugin_t* Describe() {
  static const weft_plugin_t plugin = [] {
    weft_plugin_t p = weft::sdk::DescribePlugin("add", "1.0.0", nullptr, WEFT_PLUGIN_DEVICE);
    p.device = &kDevice;
    return p;
  }();
  return &plugin;
}

}  // namespace

WEFT_SDK_DEFINE_PLUGIN(Describe)
