// The lite build's convolutions, pooling and matrix products
// (docs/lite.md): XNNPACK, the library TensorFlow Lite runs on phones, in
// place of oneDNN (nn_conv.cc, nn_fused.cc and matmul.cc in the full
// build), for the same ops with the same attrs and semantics.
//
// XNNPACK packs a convolution's filter and bias, or a product's weights and
// bias, when it makes the operator, so an operator is kept while they are
// unchanged: while their buffers are the same when the op promises constant
// weights (the optimizer's constant_filter and constant_b), else while
// their bytes are. XNNPACK's clamp would turn NaN into a bound, so the
// operators run unclamped and the residual and activation follow in one
// pass (epilogue.h), computed as the ops they replace compute them. What
// XNNPACK declines (a transposed a, f64, a geometry it refuses, a CPU it
// cannot use) runs the direct loops.
//
// XNNPACK may read up to XNN_EXTRA_BYTES (16) past the end of an input; every
// tensor the kernels see was allocated with posix_memalign, whose block is
// always followed by mapped memory (the allocator's next header or the
// slack of a mapped block), so such a read never faults.
#include <pthreadpool.h>
#include <sys/mman.h>
#include <xnnpack.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>

#include "../kernel_framework.h"
#include "direct_pool.h"
#include "epilogue.h"
#include "gemm.h"
#include "kernel_util.h"
#include "lite_threads.h"
#include "loop_gemm.h"
#include "window.h"
#include "xnn_memory.h"

namespace weft::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// XNNPACK, initialised once; false where it cannot run (a CPU without the
// instructions it needs), and the kernels take the loops.
bool XnnReady() {
  static const bool ready = xnn_initialize(XnnAllocator()) == xnn_status_success;
  return ready;
}

// The threads XNNPACK's operators run on (lite_threads.h).
pthreadpool_t Pool() { return LitePool(); }

// The weights an operator was made from: their buffer, and, unless the op
// promises they are constant, a copy of their bytes to compare.
class WeightsSeen {
 public:
  bool Same(const float* data, int64_t n, bool constant) const {
    if (data != data_ || n != n_) return false;
    return constant ? constant_ : std::equal(data, data + n, copy_.begin());
  }
  void Remember(const float* data, int64_t n, bool constant) {
    data_ = data;
    n_ = n;
    constant_ = constant;
    if (constant) {
      copy_.clear();
    } else {
      copy_.assign(data, data + n);
    }
  }

 private:
  const float* data_ = nullptr;
  int64_t n_ = -1;
  bool constant_ = false;
  std::vector<float> copy_;
};

// dst[c * dst_stride + r] = src[r * cols + c] for a |rows| x |cols| matrix,
// by tiles that stay in cache, the column tiles shared among the threads:
// XNNPACK's own packing of transposed weights (XNN_FLAG_TRANSPOSE_WEIGHTS)
// reads them with a stride and took three times as long as this copy and a
// plain packing (MobileNet-v2's first run).
void TransposeInto(const float* src, int64_t rows, int64_t cols, float* dst, int64_t dst_stride) {
  constexpr int64_t kTile = 32;
  const int64_t tiles = (cols + kTile - 1) / kTile;
  ParallelFor(tiles, rows * kTile, [&](int64_t begin, int64_t end) {
    for (int64_t c0 = begin * kTile; c0 < std::min(cols, end * kTile); c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
        const int64_t r1 = std::min(rows, r0 + kTile);
        for (int64_t c = c0; c < c1; ++c) {
          for (int64_t r = r0; r < r1; ++r) dst[c * dst_stride + r] = src[r * cols + c];
        }
      }
    }
  });
}

// Scratch for weights on their way to XNNPACK's packing, one mapping per
// thread, in huge pages (xnn_memory.h), kept for the next operator up to
// kKeep bytes: a fresh buffer per layer had its pages faulted in again
// each time, and growing a malloc'd one in 4 KiB pages still made a
// quarter of MobileNet-v2's first-run page faults. A larger one (a big
// fully connected layer's) goes once the operator is made, so no thread
// holds more than kKeep.
class Scratch {
 public:
  static constexpr std::size_t kKeep = std::size_t{4} << 20;

  ~Scratch() { Release(); }
  float* Get(int64_t n) {
    std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
    if (bytes > size_) {
      Release();
      data_ = MapHugePages(bytes);
      if (data_ == nullptr) throw std::bad_alloc();
      size_ = bytes;
    }
    return static_cast<float*>(data_);
  }
  void Trim() {
    if (size_ > kKeep) Release();
  }

 private:
  void Release() {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }

  void* data_ = nullptr;
  std::size_t size_ = 0;
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// An XNNPACK operator, deleted with its owner.
struct XnnOperatorDeleter {
  void operator()(xnn_operator* op) const { xnn_delete_operator(op); }
};
using XnnOperator = std::unique_ptr<xnn_operator, XnnOperatorDeleter>;

// One site's XNNPACK fully connected operator: c [m, n] = a [m, k] b + bias
// with b [k, n] ([n, k] when |tb|), remade when b or the bias changes.
class XnnFullyConnected {
 public:
  bool Run(int64_t m, int64_t n, int64_t k, bool tb, const float* a, const float* b, const float* bias, bool constant_b,
           float* c) {
    if (!XnnReady()) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    const bool fits = op_ != nullptr && n == n_ && k == k_ && tb == tb_ && b_.Same(b, k * n, constant_b) &&
                      bias_.Same(bias, bias == nullptr ? 0 : n, false);
    if (!fits) {
      op_.reset();
      xnn_operator_t op = nullptr;
      // XNNPACK takes the weights as [n, k]: b itself when transposed, else
      // a transposed copy, which the packing reads and then lets go.
      const float* nk = b;
      if (!tb) {
        float* transposed = ThreadScratch().Get(n * k);
        TransposeInto(b, k, n, transposed, k);
        nk = transposed;
      }
      const xnn_status made = xnn_create_fully_connected_nc_f32(k, n, k, n, nk, bias, -kInf, kInf, 0, &op);
      ThreadScratch().Trim();
      if (made != xnn_status_success) return false;
      op_.reset(op);
      n_ = n;
      k_ = k;
      tb_ = tb;
      // What the operator packed; an operator that fits was made from the
      // same, so there is nothing to copy again.
      b_.Remember(b, k * n, constant_b);
      bias_.Remember(bias, bias == nullptr ? 0 : n, false);
    }
    return xnn_setup_fully_connected_nc_f32(op_.get(), m, a, c, Pool()) == xnn_status_success &&
           xnn_run_operator(op_.get(), Pool()) == xnn_status_success;
  }

 private:
  std::mutex mutex_;
  XnnOperator op_;
  int64_t n_ = -1, k_ = -1;
  bool tb_ = false;
  WeightsSeen b_, bias_;
};

// One site's XNNPACK convolution over NHWC data, remade when the geometry
// (but for the batch and input size), the filter or the bias changes.
// Thread-safe: XNNPACK's setup and run share the operator's state.
class XnnConvolution {
 public:
  // output = conv(input, filter) + bias, NHWC with an HWIO filter (HWCM
  // depthwise); false, with nothing written, where XNNPACK declines.
  bool Run(const Geometry& g, bool depthwise, const float* input, const float* filter, int64_t filter_size,
           const float* bias, bool constant_filter, float* output) {
    if (!XnnReady()) return false;
    if (!depthwise && g.window_h == 1 && g.window_w == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
        g.pad_bottom == 0 && g.pad_left == 0 && g.pad_right == 0) {
      // A pointwise convolution is a product of the pixels [N*H*W, C] and
      // the filter [C, O] as it is stored: no transposed copy to pack.
      return pointwise_.Run(g.batch * g.in_h * g.in_w, g.out_channels, g.channels, /*tb=*/false, input, filter, bias,
                            constant_filter, output);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Fits(g, depthwise, filter, filter_size, bias, constant_filter)) {
      if (!Make(g, depthwise, filter, bias)) return false;
      // What the operator packed (an operator that fits was made from the same).
      filter_.Remember(filter, filter_size, constant_filter);
      bias_.Remember(bias, bias == nullptr ? 0 : g.out_channels, false);
    }
    return xnn_setup_convolution2d_nhwc_f32(op_.get(), g.batch, g.in_h, g.in_w, input, output, Pool()) ==
               xnn_status_success &&
           xnn_run_operator(op_.get(), Pool()) == xnn_status_success;
  }

 private:
  bool Fits(const Geometry& g, bool depthwise, const float* filter, int64_t filter_size, const float* bias,
            bool constant_filter) const {
    return op_ != nullptr && depthwise == depthwise_ && SameWindow(g, made_) &&
           filter_.Same(filter, filter_size, constant_filter) &&
           bias_.Same(bias, bias == nullptr ? 0 : g.out_channels, false);
  }

  static bool SameWindow(const Geometry& a, const Geometry& b) {
    return a.channels == b.channels && a.out_channels == b.out_channels && a.window_h == b.window_h &&
           a.window_w == b.window_w && a.stride_h == b.stride_h && a.stride_w == b.stride_w &&
           a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w && a.pad_top == b.pad_top &&
           a.pad_bottom == b.pad_bottom && a.pad_left == b.pad_left && a.pad_right == b.pad_right;
  }

  bool Make(const Geometry& g, bool depthwise, const float* filter, const float* bias) {
    op_.reset();
    const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
    xnn_operator_t op = nullptr;
    xnn_status status;
    if (depthwise) {
      // HWCM is XNNPACK's depthwise layout: [1, H, W, C * M].
      const int64_t multiplier = g.out_channels / std::max<int64_t>(g.channels, 1);
      status = xnn_create_convolution2d_nhwc_f32(
          u32(g.pad_top), u32(g.pad_right), u32(g.pad_bottom), u32(g.pad_left), u32(g.window_h), u32(g.window_w),
          u32(g.stride_h), u32(g.stride_w), u32(g.dilation_h), u32(g.dilation_w), u32(g.channels), 1, multiplier,
          g.channels, g.out_channels, filter, bias, -kInf, kInf, XNN_FLAG_DEPTHWISE_CONVOLUTION, &op);
    } else {
      // HWIO to XNNPACK's OHWI: each tap's [I, O] block transposed into
      // place, O rows of taps * I apart.
      const int64_t taps = g.window_h * g.window_w;
      float* ohwi = ThreadScratch().Get(taps * g.channels * g.out_channels);
      for (int64_t t = 0; t < taps; ++t) {
        TransposeInto(filter + t * g.channels * g.out_channels, g.channels, g.out_channels, ohwi + t * g.channels,
                      taps * g.channels);
      }
      status = xnn_create_convolution2d_nhwc_f32(u32(g.pad_top), u32(g.pad_right), u32(g.pad_bottom), u32(g.pad_left),
                                                 u32(g.window_h), u32(g.window_w), u32(g.stride_h), u32(g.stride_w),
                                                 u32(g.dilation_h), u32(g.dilation_w), 1, g.channels, g.out_channels,
                                                 g.channels, g.out_channels, ohwi, bias, -kInf, kInf, 0, &op);
      ThreadScratch().Trim();
    }
    if (status != xnn_status_success) return false;
    op_.reset(op);
    made_ = g;
    depthwise_ = depthwise;
    return true;
  }

  XnnFullyConnected pointwise_;
  std::mutex mutex_;
  XnnOperator op_;
  Geometry made_;
  bool depthwise_ = false;
  WeightsSeen filter_, bias_;
};

// What the epilogue still owes after the product: everything after the
// loops, all but the bias after XNNPACK (which added it). |outer|,
// |channels| and |inner| describe the output as Epilogue::Apply does.
void FinishEpilogue(Epilogue e, bool bias_added, float* out, const float* bias, const float* residual, int64_t outer,
                    int64_t channels, int64_t inner) {
  if (bias_added) e.bias = false;
  if (e.empty()) return;
  const int64_t n = outer * channels * inner;
  if (!e.bias) {
    // The residual (a vectorised add), then the activation in its own pass.
    if (e.residual) {
      ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] += residual[i];
      });
    }
    if (e.act != Epilogue::Act::kNone) e.ActivateInPlace(out, n);
    return;
  }
  e.Apply(out, bias, residual, outer, channels, inner);
}

// A (depthwise) convolution with an epilogue over |input| in data_format,
// into |output|: XNNPACK where it takes it, else the direct loops.
void Convolve(Context& ctx, XnnConvolution& xnn, const Geometry& g, bool nchw, bool depthwise, const Tensor& input,
              const Tensor& filter, bool constant_filter, const Epilogue& e, const float* bias, const float* residual,
              Tensor& output) {
  bool bias_added = false;
  if (g.channels > 0) {
    const float* in = ReadNhwc<float>(ctx, input, nchw);
    WriteNhwc<float>(ctx, output, nchw, [&](float* out) {
      bias_added = xnn.Run(g, depthwise, in, filter.as<float>(), filter.num_elements, e.bias ? bias : nullptr,
                           constant_filter, out);
      if (bias_added) return;
      if (depthwise) {
        DirectConv<float, true>(g, in, filter.as<float>(), out);
      } else {
        DirectConv<float, false>(g, in, filter.as<float>(), out);
      }
    });
    bias_added = bias_added && e.bias;
  } else {
    std::fill(output.as<float>(), output.as<float>() + output.num_elements, 0.0f);  // an empty sum
  }
  const int64_t spatial = g.out_h * g.out_w;
  if (nchw) {
    FinishEpilogue(e, bias_added, output.as<float>(), bias, residual, g.batch, g.out_channels, spatial);
  } else {
    FinishEpilogue(e, bias_added, output.as<float>(), bias, residual, g.batch * spatial, g.out_channels, 1);
  }
}

// Conv2D and DepthwiseConv2D: f32 through XNNPACK, f64 by the loops.
template <class T, bool kDepthwise>
class ConvKernel {
 public:
  explicit ConvKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/true)) {}

  void Compute(Context& ctx) {
    const Tensor input = ctx.input(0), filter = ctx.input(1);
    const Geometry g = ConvGeometry(attrs_, input.dims, filter.dims, kDepthwise);
    Tensor output = ctx.allocate_output(0, g.OutputDims(attrs_.nchw));
    if (output.num_elements == 0) return;
    if constexpr (std::is_same_v<T, float>) {
      Convolve(ctx, xnn_, g, attrs_.nchw, kDepthwise, input, filter, /*constant_filter=*/false, Epilogue{}, nullptr,
               nullptr, output);
    } else {
      if (g.channels == 0) {
        std::fill(output.as<T>(), output.as<T>() + output.num_elements, T(0));
        return;
      }
      const T* in = ReadNhwc<T>(ctx, input, attrs_.nchw);
      WriteNhwc<T>(ctx, output, attrs_.nchw, [&](T* out) { DirectConv<T, kDepthwise>(g, in, filter.as<T>(), out); });
    }
  }

 private:
  WindowAttrs attrs_;
  XnnConvolution xnn_;
};

template <class T, bool kMax>
class PoolKernel {
 public:
  explicit PoolKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/false)) {
    std::tie(window_h_, window_w_) = SpatialAttr(init, "ksize", attrs_.nchw);
  }

  void Compute(Context& ctx) {
    const Tensor input = ctx.input(0);
    const Geometry g = PoolGeometry(attrs_, input.dims, window_h_, window_w_);
    Tensor output = ctx.allocate_output(0, g.OutputDims(attrs_.nchw));
    if (output.num_elements == 0) return;
    DirectPool<T, kMax>(attrs_.nchw ? g.PlanesAsImages() : g, input.as<T>(), output.as<T>());
  }

 private:
  WindowAttrs attrs_;
  int64_t window_h_ = 1, window_w_ = 1;
};

class FusedConv2DKernel {
 public:
  explicit FusedConv2DKernel(const InitContext& init)
      : attrs_(ReadWindowAttrs(init, /*dilations=*/true)),
        depthwise_(init.Bool("depthwise")),
        constant_filter_(init.Bool("constant_filter")),
        pads_(ReadExplicitPaddings(init)),
        epilogue_(Epilogue::Read(init)) {}

  void Compute(Context& ctx) {
    const Tensor input = ctx.input(0), filter = ctx.input(1);
    const Geometry g = FusedConvGeometry(attrs_, pads_, input.dims, filter.dims, depthwise_);
    Tensor output = ctx.allocate_output(0, g.OutputDims(attrs_.nchw));
    const FusedArgs args = ReadFusedArgs(ctx, epilogue_, g.out_channels, output.dims);
    if (output.num_elements == 0) return;
    Convolve(ctx, xnn_, g, attrs_.nchw, depthwise_, input, filter, constant_filter_, epilogue_,
             epilogue_.bias ? args.bias.as<float>() : nullptr, epilogue_.residual ? args.residual.as<float>() : nullptr,
             output);
  }

 private:
  WindowAttrs attrs_;
  bool depthwise_, constant_filter_;
  std::vector<int64_t> pads_;
  Epilogue epilogue_;
  XnnConvolution xnn_;
};

// c = a b for one (m, n, k): f32 through XNNPACK (but a transposed a), the
// rest by the loops.
template <class T>
void Product(XnnFullyConnected& xnn, const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
             bool constant_b) {
  if constexpr (std::is_same_v<T, float>) {
    if (k > 0 && !ta && xnn.Run(m, n, k, tb, a, b, nullptr, constant_b, c)) return;
  }
  if constexpr (std::is_integral_v<T>) {
    LoopIntGemm<T>(a, b, c, m, n, k, ta, tb);
  } else {
    LoopGemm<T>(a, b, c, m, n, k, ta, tb);
  }
}

template <class T>
class MatMulKernel {
 public:
  explicit MatMulKernel(const InitContext& init) : ta_(init.Bool("transpose_a")), tb_(init.Bool("transpose_b")) {}
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    const auto [m, k, n] = sdk::CheckMatMul(a, b, ta_, tb_);
    Tensor c = ctx.allocate_output(0, {m, n});
    if (c.num_elements == 0) return;
    Product<T>(xnn_, a.as<T>(), b.as<T>(), c.as<T>(), m, n, k, ta_, tb_, /*constant_b=*/false);
  }

 private:
  bool ta_, tb_;
  XnnFullyConnected xnn_;
};

template <class T>
class BatchMatMulKernel {
 public:
  explicit BatchMatMulKernel(const InitContext& init) : ax_(init.Bool("adj_x")), ay_(init.Bool("adj_y")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), y = ctx.input(1);
    const sdk::BatchMatMulShape s = sdk::CheckBatchMatMul(x, y, ax_, ay_);
    Tensor out = ctx.allocate_output(0, s.OutputDims());
    if (s.count == 0 || s.m == 0 || s.n == 0) return;
    const int64_t m = s.m, n = s.n, k = s.k;
    s.ForEachMatrix([&](int64_t i, int64_t xi, int64_t yi) {
      const T* a = x.as<T>() + xi * m * k;
      const T* b = y.as<T>() + yi * k * n;
      if constexpr (std::is_integral_v<T>) {
        LoopIntGemm<T>(a, b, out.as<T>() + i * m * n, m, n, k, ax_, ay_);
      } else {
        LoopGemm<T>(a, b, out.as<T>() + i * m * n, m, n, k, ax_, ay_);
      }
    });
  }

 private:
  bool ax_, ay_;
};

class FusedMatMulKernel {
 public:
  explicit FusedMatMulKernel(const InitContext& init) : attrs_(init) {}

  void Compute(Context& ctx) {
    const FusedMatMulCall call(ctx, attrs_);
    if (call.c.num_elements == 0) return;
    const float* a = call.a.as<float>();
    const float* b = call.b.as<float>();
    float* c = call.c.as<float>();
    const bool in_xnn =
        call.k > 0 && !attrs_.ta && xnn_.Run(call.m, call.n, call.k, attrs_.tb, a, b, call.bias, attrs_.constant_b, c);
    if (!in_xnn) LoopGemm<float>(a, b, c, call.m, call.n, call.k, attrs_.ta, attrs_.tb);
    FinishEpilogue(attrs_.epilogue, in_xnn && call.bias != nullptr, c, call.bias, call.residual, call.m, call.n, 1);
  }

 private:
  FusedMatMulAttrs attrs_;
  XnnFullyConnected xnn_;
};

}  // namespace

// --- Gemm (gemm.h): the products of the other kernels (the LSTM cell) --------------

struct GemmCache::Impl {
  XnnFullyConnected xnn;
};

GemmCache::GemmCache() : impl_(std::make_unique<Impl>()) {}
GemmCache::~GemmCache() = default;

template <class T>
void Gemm(GemmCache& cache, const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  if (m * n == 0) return;
  Product<T>(cache.impl().xnn, a, b, c, m, n, k, ta, tb, /*constant_b=*/false);
}
template void Gemm<float>(GemmCache&, const float*, const float*, float*, int64_t, int64_t, int64_t, bool, bool);
template void Gemm<double>(GemmCache&, const double*, const double*, double*, int64_t, int64_t, int64_t, bool, bool);

// The families the full build registers from nn_conv.cc, matmul.cc and
// nn_fused.cc, for the same ops and dtypes where the lite build has a
// kernel (no f16/bf16 products: the lite build's models are f32).
void RegisterNnConvKernels(KernelRegistry& r) {
  AddKernel<"Conv2D", ConvKernel<float, false>, WEFT_DTYPE_F32>(r, {{"T", WEFT_DTYPE_F32}});
  AddKernel<"Conv2D", ConvKernel<double, false>, WEFT_DTYPE_F64>(r, {{"T", WEFT_DTYPE_F64}});
  AddKernel<"DepthwiseConv2D", ConvKernel<float, true>, WEFT_DTYPE_F32>(r, {{"T", WEFT_DTYPE_F32}});
  AddKernel<"DepthwiseConv2D", ConvKernel<double, true>, WEFT_DTYPE_F64>(r, {{"T", WEFT_DTYPE_F64}});
  AddKernel<"MaxPool", PoolKernel<float, true>, WEFT_DTYPE_F32>(r, {{"T", WEFT_DTYPE_F32}});
  AddKernel<"MaxPool", PoolKernel<double, true>, WEFT_DTYPE_F64>(r, {{"T", WEFT_DTYPE_F64}});
  AddKernel<"AvgPool", PoolKernel<float, false>, WEFT_DTYPE_F32>(r, {{"T", WEFT_DTYPE_F32}});
  AddKernel<"AvgPool", PoolKernel<double, false>, WEFT_DTYPE_F64>(r, {{"T", WEFT_DTYPE_F64}});
  RegisterBiasAddKernels(r);
}

void RegisterMatMulKernels(KernelRegistry& r) {
  auto add = [&r]<class T>() {
    AddKernel<"MatMul", MatMulKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
    AddKernel<"BatchMatMul", BatchMatMulKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
  };
  add.template operator()<float>();
  add.template operator()<double>();
  add.template operator()<int32_t>();
  add.template operator()<int64_t>();
}

void RegisterFusedKernels(KernelRegistry& r) {
  AddKernel<"_FusedConv2D", FusedConv2DKernel, WEFT_DTYPE_F32>(r, {{"T", WEFT_DTYPE_F32}});
  AddKernel<"_FusedMatMul", FusedMatMulKernel, WEFT_DTYPE_F32>(r, {{"T", WEFT_DTYPE_F32}});
}

}  // namespace weft::cpu
