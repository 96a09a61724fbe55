// int8 kernels (docs/quantization.md): QuantizeLinear, DequantizeLinear,
// and the graph optimizer's quantized convolution and product (_QConv2D,
// _QMatMul). The full build runs the quantized ops as oneDNN int8
// primitives (32-bit accumulation, the requantization as output scales,
// zero points and post-ops); what oneDNN declines, and the lite build, run
// the direct loops here: the products accumulated in int32, then
// requantized in f32 as QuantizeLinear rounds (half to even, saturating).
#if !defined(WEFT_CPU_LITE)
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>

#include "../kernel_framework.h"
#include "epilogue.h"
#include "weft/sdk/log.h"
#include "window.h"
#if !defined(WEFT_CPU_LITE)
#include "conv_util.h"
#include "dnnl_util.h"
#endif

namespace weft::cpu {
namespace {

template <class Q>
constexpr float kQMin = static_cast<float>(std::numeric_limits<Q>::min());
template <class Q>
constexpr float kQMax = static_cast<float>(std::numeric_limits<Q>::max());

// round(v) + zero_point saturated to Q, rounding half to even (the default
// rounding mode: adding and subtracting 1.5 * 2^23 rounds a float below
// 2^22 in magnitude, which the clamp first makes it), NaN to zero_point.
// Branch-free, so that the loops over it vectorize.
template <class Q>
inline Q Requantize(float v, float zero_point) {
  v = v == v ? v : 0.0f;  // NaN: 0, the zero point once shifted
  v = std::min(std::max(v, kQMin<Q> - zero_point - 1.0f), kQMax<Q> - zero_point + 1.0f);
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  const float rounded = (v + kMagic) - kMagic;
  return static_cast<Q>(std::min(std::max(rounded + zero_point, kQMin<Q>), kQMax<Q>));
}

// A scale and zero point input, scalar or per channel along axis: |n| of
// them (1, or the axis' size), and the tensor as [outer, n, inner].
struct PerAxis {
  int64_t outer = 1, n = 1, inner = 1;
};

PerAxis ReadPerAxis(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis) {
  if (scale.rank() > 1) Fail("the scale must be a scalar or 1-D, got ", DimsString(scale.dims));
  if (zero_point.num_elements != scale.num_elements) {
    Fail("the zero point has ", zero_point.num_elements, " elements but the scale ", scale.num_elements);
  }
  PerAxis p;
  p.inner = x.num_elements;
  if (scale.num_elements == 1) return p;
  const int rank = x.rank();
  if (axis < -rank || axis >= rank) Fail("axis ", axis, " is out of range for an input of rank ", rank);
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  if (x.dim(a) != scale.num_elements) {
    Fail("the scale has ", scale.num_elements, " elements but axis ", axis, " of the input ", DimsString(x.dims),
         " has ", x.dim(a));
  }
  p.n = x.dim(a);
  p.outer = 1;
  for (int i = 0; i < a; ++i) p.outer *= x.dim(i);
  p.inner = 1;
  for (int i = a + 1; i < rank; ++i) p.inner *= x.dim(i);
  return p;
}

template <class Q>
class QuantizeKernel {
 public:
  explicit QuantizeKernel(const InitContext& init) : axis_(init.Int("axis")) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), scale = ctx.input(1), zero_point = ctx.input(2);
    const PerAxis p = ReadPerAxis(x, scale, zero_point, axis_);
    for (int64_t c = 0; c < p.n; ++c) {
      if (!(scale.as<float>()[c] > 0) || !std::isfinite(scale.as<float>()[c])) {
        Fail("the scale must be positive and finite, got ", scale.as<float>()[c]);
      }
    }
    Tensor y = ctx.allocate_output(0, x.dims);
    const float* in = x.as<float>();
    Q* out = y.as<Q>();
    ParallelFor(p.outer * p.n, p.inner * 4, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t c = row % p.n;
        const float s = scale.as<float>()[c], zp = zero_point.as<Q>()[c];
        const float* from = in + row * p.inner;
        Q* to = out + row * p.inner;
        for (int64_t i = 0; i < p.inner; ++i) to[i] = Requantize<Q>(from[i] / s, zp);
      }
    });
  }

 private:
  int64_t axis_;
};

template <class Q>
class DequantizeKernel {
 public:
  explicit DequantizeKernel(const InitContext& init) : axis_(init.Int("axis")) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), scale = ctx.input(1), zero_point = ctx.input(2);
    const PerAxis p = ReadPerAxis(x, scale, zero_point, axis_);
    Tensor y = ctx.allocate_output(0, x.dims);
    const Q* in = x.as<Q>();
    float* out = y.as<float>();
    ParallelFor(p.outer * p.n, p.inner * 2, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t c = row % p.n;
        const float s = scale.as<float>()[c];
        const int64_t zp = zero_point.as<Q>()[c];
        const Q* from = in + row * p.inner;
        float* to = out + row * p.inner;
        // (x - zero_point) exactly (in 64 bits for i32), then scaled.
        for (int64_t i = 0; i < p.inner; ++i) to[i] = static_cast<float>(static_cast<int64_t>(from[i]) - zp) * s;
      }
    });
  }

 private:
  int64_t axis_;
};

// The quantization of a _QConv2D or _QMatMul, from its attrs.
struct QuantAttrs {
  weft_dtype_t tin, tout, tres;
  float input_scale, output_scale, residual_scale;
  int32_t input_zero_point, output_zero_point, residual_zero_point;
  std::vector<float> weight_scales;  // one, or one per output channel
  bool bias, residual;
  std::string activation;
  float low, high;  // the activation's bounds, in real values

  QuantAttrs(const InitContext& init, const char* scales_attr)
      : tin(init.Type("Tin")),
        tout(init.Type("Tout")),
        tres(init.Type("Tres")),
        input_scale(static_cast<float>(init.Float("input_scale"))),
        output_scale(static_cast<float>(init.Float("output_scale"))),
        residual_scale(static_cast<float>(init.Float("residual_scale"))),
        input_zero_point(ZeroPoint(init, "input_zero_point", tin)),
        output_zero_point(ZeroPoint(init, "output_zero_point", tout)),
        residual_zero_point(ZeroPoint(init, "residual_zero_point", tres)),
        bias(init.Int("Nb") == 1),
        residual(init.Int("Nr") == 1),
        activation(init.String("activation")),
        low(-std::numeric_limits<float>::infinity()),
        high(std::numeric_limits<float>::infinity()) {
    for (double s : init.Floats(scales_attr)) weight_scales.push_back(static_cast<float>(s));
    if (activation == "Relu" || activation == "Relu6") low = 0;
    if (activation == "Relu6") high = 6;
    if (activation == "Clip") {
      low = static_cast<float>(init.Float("alpha"));
      high = static_cast<float>(init.Float("beta"));
    }
  }

  static int32_t ZeroPoint(const InitContext& init, const char* attr, weft_dtype_t dtype) {
    const int64_t zp = init.Int(attr);
    const int64_t lo = dtype == WEFT_DTYPE_U8 ? 0 : -128, hi = dtype == WEFT_DTYPE_U8 ? 255 : 127;
    if (dtype != WEFT_DTYPE_F32 && (zp < lo || zp > hi)) Fail(attr, " ", zp, " is outside its type's range");
    return static_cast<int32_t>(zp);
  }

  // The real value of output channel |o|'s accumulator unit.
  float Multiplier(int64_t o) const {
    return input_scale * weight_scales[weight_scales.size() == 1 ? 0 : static_cast<std::size_t>(o)];
  }
  void CheckScales(int64_t channels) const {
    if (weight_scales.size() != 1 && static_cast<int64_t>(weight_scales.size()) != channels) {
      Fail("the op has ", weight_scales.size(), " weight scales for ", channels, " output channels");
    }
  }
};

// The direct loops' requantization of |rows| x |channels| int32 sums.
template <class Out, class Res>
void RequantizeRows(const QuantAttrs& q, const int32_t* acc, int64_t rows, int64_t channels, const float* bias,
                    const Res* residual, Out* out) {
  std::vector<float> multiplier(static_cast<std::size_t>(channels));
  for (int64_t o = 0; o < channels; ++o) multiplier[static_cast<std::size_t>(o)] = q.Multiplier(o);
  ParallelFor(rows, channels * 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t o = 0; o < channels; ++o) {
        const int64_t i = r * channels + o;
        float v = static_cast<float>(acc[i]) * multiplier[static_cast<std::size_t>(o)];
        if (bias != nullptr) v += bias[o];
        if (residual != nullptr) {
          if constexpr (std::is_same_v<Res, float>) {
            v += residual[i];
          } else {
            v += q.residual_scale * static_cast<float>(static_cast<int32_t>(residual[i]) - q.residual_zero_point);
          }
        }
        v = std::min(std::max(v, q.low), q.high);
        if constexpr (std::is_same_v<Out, float>) {
          out[i] = v;
        } else {
          out[i] = Requantize<Out>(v / q.output_scale, static_cast<float>(q.output_zero_point));
        }
      }
    }
  });
}

template <class Fn>
void WithOutType(weft_dtype_t dtype, Fn&& fn) {
  switch (dtype) {
    case WEFT_DTYPE_I8: fn(int8_t{}); break;
    case WEFT_DTYPE_U8: fn(uint8_t{}); break;
    default: fn(float{}); break;
  }
}

// The products are summed in 32 bits, oneDNN's as the direct loops': each
// term is at most 255 x 128 in magnitude, so a sum of more terms than this
// could overflow.
constexpr int64_t kMaxTerms = (int64_t{1} << 31) / (255 * 128);

void CheckTerms(int64_t terms) {
  if (terms > kMaxTerms) {
    Fail("each output sums ", terms, " int8 products, more than the ", kMaxTerms,
         " a 32-bit sum holds without overflow; keep this product in f32 (weft quantize --exclude)");
  }
}

// |n| quantized values at |x| minus |zero_point|, as int32.
Tensor Centered(Context& ctx, const Tensor& x, int32_t zero_point) {
  Tensor out = ctx.allocate_temp(WEFT_DTYPE_I32, x.dims);
  int32_t* to = out.as<int32_t>();
  if (x.dtype == WEFT_DTYPE_U8) {
    const auto* from = x.as<uint8_t>();
    for (int64_t i = 0; i < x.num_elements; ++i) to[i] = static_cast<int32_t>(from[i]) - zero_point;
  } else {
    const auto* from = x.as<int8_t>();
    for (int64_t i = 0; i < x.num_elements; ++i) to[i] = static_cast<int32_t>(from[i]) - zero_point;
  }
  return out;
}

#if !defined(WEFT_CPU_LITE)
dnnl::memory::data_type DnnlType(weft_dtype_t dtype) {
  switch (dtype) {
    case WEFT_DTYPE_I8: return dnnl::memory::data_type::s8;
    case WEFT_DTYPE_U8: return dnnl::memory::data_type::u8;
    default: return dnnl::memory::data_type::f32;
  }
}

// The requantization as oneDNN attrs: output scales per channel (input
// scale x weight scale / output scale), the bias pre-divided by the input
// and weight scales (oneDNN adds it to the int32 sum before scaling), the
// residual as a sum post-op in the output's units, the activation as a
// clip in them, and the zero points.
struct DnnlRequant {
  dnnl::primitive_attr attr = WithUserScratchpad();
  std::vector<float> bias_scale;  // the bias is multiplied by these before the run

  DnnlRequant(const QuantAttrs& q, int64_t channels, int scale_mask) {
    std::vector<float> scales(static_cast<std::size_t>(channels));
    const float out = q.tout == WEFT_DTYPE_F32 ? 1.0f : q.output_scale;
    for (int64_t o = 0; o < channels; ++o) {
      scales[static_cast<std::size_t>(o)] = q.Multiplier(o) / out;
      bias_scale.push_back(1.0f / q.Multiplier(o));
    }
    attr.set_output_scales(scale_mask, scales);
    dnnl::post_ops ops;
    if (q.residual) {
      // The residual is copied into dst and read back as its own type,
      // which must have dst's size; an int8 residual of an f32 output is
      // written there dequantized (PutResidual).
      if (q.tres == WEFT_DTYPE_F32 && q.tout != WEFT_DTYPE_F32) throw dnnl::error(dnnl_unimplemented, "residual");
      if (q.tout == WEFT_DTYPE_F32) {
        ops.append_sum(1.0f);
      } else {
        ops.append_sum(q.residual_scale / out, q.residual_zero_point, DnnlType(q.tres));
      }
    }
    if (q.low > -std::numeric_limits<float>::infinity() || q.high < std::numeric_limits<float>::infinity()) {
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip_v2, q.low / out, q.high / out);
    }
    attr.set_post_ops(ops);
    if (q.input_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {q.input_zero_point});
    if (q.tout != WEFT_DTYPE_F32 && q.output_zero_point != 0) {
      attr.set_zero_points(DNNL_ARG_DST, 0, {q.output_zero_point});
    }
  }

  // The residual where the sum post-op reads it: in |dst|, |n| elements
  // of the residual's type, or dequantized for an f32 output.
  static void PutResidual(const QuantAttrs& q, const void* residual, void* dst, int64_t n) {
    if (!q.residual) return;
    if (q.tout != WEFT_DTYPE_F32 || q.tres == WEFT_DTYPE_F32) {
      std::memcpy(dst, residual, static_cast<std::size_t>(n) * ElementSize(q.tres));
      return;
    }
    auto* out = static_cast<float*>(dst);
    const float zp = static_cast<float>(q.residual_zero_point), scale = q.residual_scale;
    WithOutType(q.tres, [&](auto zero) {
      using Res = decltype(zero);
      const auto* r = static_cast<const Res*>(residual);
      ParallelFor(n, 2, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = scale * (static_cast<float>(r[i]) - zp);
      });
    });
  }

  // The bias in oneDNN's units, in a temp of the kernel.
  const float* Bias(Context& ctx, const float* bias) const {
    if (bias == nullptr) return nullptr;
    Tensor scaled = ctx.allocate_temp(WEFT_DTYPE_F32, {static_cast<int64_t>(bias_scale.size())});
    for (std::size_t o = 0; o < bias_scale.size(); ++o) scaled.as<float>()[o] = bias[o] * bias_scale[o];
    return scaled.as<float>();
  }
};

// Declines (as PrimitiveCache takes a dnnl::error) a primitive oneDNN made
// from its reference implementation: slower than the direct loops here.
template <class Pd>
void RefuseReference(const Pd& pd) {
  if (std::string(pd.impl_info_str()).find("ref") != std::string::npos) throw dnnl::error(dnnl_unimplemented, "ref");
}

// Whether oneDNN's int8 products are exact for these weights. Without
// VNNI, oneDNN's x86 kernels add pairs of u8 x s8 products in 16 bits
// (vpmaddubsw), which saturates once weights exceed 7 bits (255 * 127 * 2
// > 32767); with VNNI the sums are 32-bit. Weights quantized with
// `weft quantize --weight-bits 7` (|w| <= 63) are exact everywhere; wider
// ones run the direct loops on such a CPU. The filter of a quantized op is
// a constant (the optimizer makes the op from one), so a buffer is scanned
// once.
bool HasVnni() {
  static const bool vnni = [] {
    const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    auto has = [&](dnnl_cpu_isa_t want) { return (isa & want) == static_cast<unsigned>(want); };
    return has(dnnl_cpu_isa_avx512_core_vnni) || has(dnnl_cpu_isa_avx2_vnni);
  }();
  return vnni;
}

// The attrs oneDNN runs a quantized op with. Without VNNI, oneDNN halves
// the weights of an s8 x s8 product to keep its 16-bit pair sums from
// saturating, which loses their last bit: an i8 input is shifted to u8
// (x + 128, its zero point too) and the product is u8 x s8, exact.
QuantAttrs ForDnnl(QuantAttrs q) {
  if (q.tin == WEFT_DTYPE_I8 && !HasVnni()) {
    q.tin = WEFT_DTYPE_U8;
    q.input_zero_point += 128;
  }
  return q;
}

// |x| (i8) as u8 + 128 in a temp, when ForDnnl shifted the input.
const void* DnnlInput(Context& ctx, const Tensor& x, const QuantAttrs& dnnl) {
  if (x.dtype != WEFT_DTYPE_I8 || dnnl.tin != WEFT_DTYPE_U8) return x.data;
  Tensor shifted = ctx.allocate_temp(WEFT_DTYPE_U8, x.dims);
  const auto* from = x.as<uint8_t>();  // the same bits
  uint8_t* to = shifted.as<uint8_t>();
  for (int64_t i = 0; i < x.num_elements; ++i) to[i] = static_cast<uint8_t>(from[i] ^ 0x80u);
  return shifted.data;
}

class ExactInDnnl {
 public:
  bool operator()(const Tensor& weights) {
    if (HasVnni()) return true;
    std::lock_guard<std::mutex> lock(mutex_);
    if (scanned_ != weights.data) {
      const auto* w = weights.as<int8_t>();
      int widest = 0;
      for (int64_t i = 0; i < weights.num_elements; ++i) widest = std::max(widest, std::abs(static_cast<int>(w[i])));
      exact_ = widest <= 63;
      scanned_ = weights.data;
    }
    return exact_;
  }

  // Says once that 8-bit weights run the direct loops for lack of VNNI.
  static void WarnLoops() {
    static std::once_flag warned;
    std::call_once(warned, [] {
      WEFT_SDK_LOG(WARNING) << "int8 weights use 8 bits and this CPU has no VNNI: quantized products and NCHW "
                               "convolutions with them run on direct loops, an order of magnitude slower than "
                               "oneDNN's int8 kernels; quantize with `weft quantize --weight-bits 7` for those "
                               "(docs/quantization.md)";
    });
  }

 private:
  std::mutex mutex_;
  const void* scanned_ = nullptr;
  bool exact_ = false;
};

// An int8 oneDNN (depthwise) convolution for one geometry, created once,
// its filter kept reordered (the filter of a quantized op is constant).
class DnnlQConv {
 public:
  DnnlQConv(const Geometry& g, bool nchw, bool depthwise, const QuantAttrs& q)
      : requant_(q, g.out_channels, 1 << 1), q_(q) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const tag layout = nchw ? tag::nchw : tag::nhwc;
    src_md_ = dnnl::memory::desc({g.batch, g.channels, g.in_h, g.in_w}, DnnlType(q.tin), layout);
    dst_md_ = dnnl::memory::desc({g.batch, g.out_channels, g.out_h, g.out_w}, DnnlType(q.tout), layout);
    filter_md_ = FilterDesc(g, depthwise, dt::s8);
    if (q.bias) bias_md_ = dnnl::memory::desc({g.out_channels}, dt::f32, tag::x);
    const dnnl::memory::desc any_weights = AnyLayout(filter_md_);
    const dnnl::memory::dims strides = {g.stride_h, g.stride_w};
    const dnnl::memory::dims dilations = {g.dilation_h - 1, g.dilation_w - 1};
    const dnnl::memory::dims before = {g.pad_top, g.pad_left}, after = {g.pad_bottom, g.pad_right};
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto desc =
        q.bias ? dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, src_md_, any_weights,
                                                 bias_md_, dst_md_, strides, dilations, before, after)
               : dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, src_md_, any_weights,
                                                 dst_md_, strides, dilations, before, after);
    const dnnl::convolution_forward::primitive_desc pd(desc, requant_.attr, Engine());
    RefuseReference(pd);
    primitive_ = dnnl::convolution_forward(pd);
    weights_ = std::make_unique<ReorderedWeights>(filter_md_, pd.weights_desc());
  }

  void Run(Context& ctx, const void* input, const void* filter, const float* bias, const void* residual, void* output) {
    UseIntraOpThreads();
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, dnnl::memory(src_md_, Engine(), const_cast<void*>(input))},
        {DNNL_ARG_DST, dnnl::memory(dst_md_, Engine(), output)}};
    DnnlRequant::PutResidual(q_, residual, output, static_cast<int64_t>(dst_md_.get_size() / ElementSize(q_.tout)));
    if (q_.bias)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md_, Engine(), const_cast<float*>(requant_.Bias(ctx, bias))));
    args.emplace(DNNL_ARG_WEIGHTS, weights_->as_given() ? dnnl::memory(filter_md_, Engine(), const_cast<void*>(filter))
                                                        : weights_->Get(filter, /*constant=*/true));
    Execute(primitive_, std::move(args));
  }

 private:
  DnnlRequant requant_;
  QuantAttrs q_;
  dnnl::memory::desc src_md_, dst_md_, filter_md_, bias_md_;
  dnnl::convolution_forward primitive_;
  std::unique_ptr<ReorderedWeights> weights_;
};

// An int8 oneDNN matmul for one (m, n, k), b kept reordered.
class DnnlQMatMul {
 public:
  DnnlQMatMul(int64_t m, int64_t n, int64_t k, bool tb, const QuantAttrs& q, WeightsPool& pool)
      : requant_(q, n, 1 << 1), q_(q) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    a_md_ = dnnl::memory::desc({m, k}, DnnlType(q.tin), tag::ab);
    b_md_ = dnnl::memory::desc({k, n}, dt::s8, tb ? tag::ba : tag::ab);
    c_md_ = dnnl::memory::desc({m, n}, DnnlType(q.tout), tag::ab);
    if (q.bias) bias_md_ = dnnl::memory::desc({1, n}, dt::f32, tag::ab);
    const dnnl::memory::desc any_b({k, n}, dt::s8, tag::any);
    const dnnl::matmul::primitive_desc pd(
        q.bias ? dnnl::matmul::desc(a_md_, any_b, bias_md_, c_md_) : dnnl::matmul::desc(a_md_, any_b, c_md_),
        requant_.attr, Engine());
    RefuseReference(pd);
    primitive_ = dnnl::matmul(pd);
    weights_ = pool.For(b_md_, pd.weights_desc());
  }

  void Run(Context& ctx, const void* a, const void* b, const float* bias, const void* residual, void* c) {
    UseIntraOpThreads();
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, dnnl::memory(a_md_, Engine(), const_cast<void*>(a))},
        {DNNL_ARG_WEIGHTS, weights_->as_given() ? dnnl::memory(b_md_, Engine(), const_cast<void*>(b))
                                                : weights_->Get(b, /*constant=*/true)},
        {DNNL_ARG_DST, dnnl::memory(c_md_, Engine(), c)}};
    DnnlRequant::PutResidual(q_, residual, c, static_cast<int64_t>(c_md_.get_size() / ElementSize(q_.tout)));
    if (q_.bias)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md_, Engine(), const_cast<float*>(requant_.Bias(ctx, bias))));
    Execute(primitive_, std::move(args));
  }

 private:
  DnnlRequant requant_;
  QuantAttrs q_;
  dnnl::memory::desc a_md_, b_md_, c_md_, bias_md_;
  dnnl::matmul primitive_;
  std::shared_ptr<ReorderedWeights> weights_;
};

// 8-bit weights without VNNI, exactly: w = 2a + b with a = w >> 1 in
// [-64, 63] and b = w - 2a in {0, 1}, two products oneDNN sums exactly in
// int32 (pairs of u8 x a stay within 16 bits), added, then requantized by
// the direct loops' code. About twice the time of 7-bit weights, where
// the loops take an order of magnitude more (BENCHMARKS.md).
class SplitWeights {
 public:
  // The halves of |filter| (int8), made again when its buffer changes.
  std::pair<const int8_t*, const int8_t*> For(const Tensor& filter) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (source_ != filter.data || halves_ == nullptr) {
      auto halves = std::make_shared<std::vector<int8_t>>(static_cast<std::size_t>(2 * filter.num_elements));
      const auto* w = filter.as<int8_t>();
      for (int64_t i = 0; i < filter.num_elements; ++i) {
        const auto a = static_cast<int8_t>(w[i] >> 1);
        (*halves)[static_cast<std::size_t>(i)] = a;
        (*halves)[static_cast<std::size_t>(filter.num_elements + i)] = static_cast<int8_t>(w[i] - 2 * a);
      }
      halves_ = std::move(halves);
      source_ = filter.data;
    }
    return {halves_->data(), halves_->data() + filter.num_elements};
  }

 private:
  std::mutex mutex_;
  const void* source_ = nullptr;
  std::shared_ptr<std::vector<int8_t>> halves_;
};

// An int8 oneDNN (depthwise) convolution giving the int32 sums of the
// centered input and a filter (no scales, bias or post-ops), NHWC, for one
// geometry: run once per half of split weights. The halves' reordered
// copies are kept while their bytes are unchanged.
class DnnlConvSums {
 public:
  DnnlConvSums(const Geometry& g, bool depthwise, const QuantAttrs& q) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    src_md_ = dnnl::memory::desc({g.batch, g.channels, g.in_h, g.in_w}, DnnlType(q.tin), tag::nhwc);
    dst_md_ = dnnl::memory::desc({g.batch, g.out_channels, g.out_h, g.out_w}, dt::s32, tag::nhwc);
    filter_md_ = FilterDesc(g, depthwise, dt::s8);
    dnnl::primitive_attr attr = WithUserScratchpad();
    if (q.input_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {q.input_zero_point});
    const dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        src_md_, AnyLayout(filter_md_), dst_md_, {g.stride_h, g.stride_w},
                                        {g.dilation_h - 1, g.dilation_w - 1}, {g.pad_top, g.pad_left},
                                        {g.pad_bottom, g.pad_right}),
        attr, Engine());
    RefuseReference(pd);
    primitive_ = dnnl::convolution_forward(pd);
    for (auto& half : halves_) half = std::make_unique<ReorderedWeights>(filter_md_, pd.weights_desc());
  }

  // sums[k] = conv(input - zero point, half k) for the halves a and b.
  void Run(const void* input, const int8_t* a, const int8_t* b, int32_t* sum_a, int32_t* sum_b) {
    UseIntraOpThreads();
    const std::pair<const int8_t*, int32_t*> runs[] = {{a, sum_a}, {b, sum_b}};
    for (std::size_t k = 0; k < 2; ++k) {
      const auto [half, sum] = runs[k];
      Execute(primitive_,
              {{DNNL_ARG_SRC, dnnl::memory(src_md_, Engine(), const_cast<void*>(input))},
               {DNNL_ARG_WEIGHTS, halves_[k]->as_given() ? dnnl::memory(filter_md_, Engine(), const_cast<int8_t*>(half))
                                                         : halves_[k]->Get(half, /*constant=*/false)},
               {DNNL_ARG_DST, dnnl::memory(dst_md_, Engine(), sum)}});
    }
  }

 private:
  dnnl::memory::desc src_md_, dst_md_, filter_md_;
  dnnl::convolution_forward primitive_;
  std::unique_ptr<ReorderedWeights> halves_[2];
};
#endif  // !WEFT_CPU_LITE

// The bias (f32, one per channel) and residual (the output's dtype and
// shape) of a quantized op, checked.
struct QuantArgs {
  const float* bias = nullptr;
  const void* residual = nullptr;
};

QuantArgs ReadQuantArgs(Context& ctx, const QuantAttrs& q, int64_t channels, const Dims& out) {
  QuantArgs args;
  int next = 2;
  if (q.bias) {
    const Tensor b = ctx.input(next++);
    if (b.rank() != 1 || b.dim(0) != channels) {
      Fail("the bias has shape ", DimsString(b.dims), " but the output has ", channels, " channels");
    }
    args.bias = b.as<float>();
  }
  if (q.residual) {
    const Tensor r = ctx.input(next);
    if (r.dtype != q.tres) Fail("the residual is not of Tres");
    if (r.dims != out) Fail("the residual has shape ", DimsString(r.dims), ", the output ", DimsString(out));
    args.residual = r.data;
  }
  return args;
}

class QConv2DKernel {
 public:
  explicit QConv2DKernel(const InitContext& init)
      : attrs_(ReadWindowAttrs(init, /*dilations=*/true)),
        depthwise_(init.Bool("depthwise")),
        pads_(ReadExplicitPaddings(init)),
        q_(init, "filter_scales") {}

  void Compute(Context& ctx) {
    const Tensor input = ctx.input(0), filter = ctx.input(1);
    const Geometry g = FusedConvGeometry(attrs_, pads_, input.dims, filter.dims, depthwise_);
    q_.CheckScales(g.out_channels);
    CheckTerms(g.window_h * g.window_w * (depthwise_ ? 1 : g.channels));
    Tensor output = ctx.allocate_output(0, g.OutputDims(attrs_.nchw));
    const QuantArgs args = ReadQuantArgs(ctx, q_, g.out_channels, output.dims);
    if (output.num_elements == 0) return;
    Tensor acc = ctx.allocate_temp(WEFT_DTYPE_I32, {g.batch, g.out_h, g.out_w, g.out_channels});
#if !defined(WEFT_CPU_LITE)
    if (g.channels > 0) {
      Dims key = input.dims;
      key.insert(key.end(), filter.dims.begin(), filter.dims.end());
      if (exact_(filter)) {
        if (DnnlQConv* conv = cache_.Get(key, g, attrs_.nchw, depthwise_, dnnl_q_)) {
          conv->Run(ctx, DnnlInput(ctx, input, dnnl_q_), filter.data, args.bias, args.residual, output.data);
          return;
        }
      } else if (!attrs_.nchw) {
        if (DnnlConvSums* sums = sums_cache_.Get(key, g, depthwise_, dnnl_q_)) {
          const auto [a, b] = split_.For(filter);
          Tensor sum_b = ctx.allocate_temp(WEFT_DTYPE_I32, acc.dims);
          int32_t* sum = acc.as<int32_t>();
          const int32_t* low = sum_b.as<int32_t>();
          sums->Run(DnnlInput(ctx, input, dnnl_q_), a, b, sum, sum_b.as<int32_t>());
          ParallelFor(acc.num_elements, 1, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) sum[i] = 2 * sum[i] + low[i];
          });
          Requantize(ctx, acc, g, args, output);
          return;
        }
      }
      if (!HasVnni()) ExactInDnnl::WarnLoops();
    }
#endif
    // The direct loops: centered int32 copies, the convolution of
    // DirectConv in int32 (a zero pad is the zero point's real zero), and
    // the requantization.
    const Tensor x = Centered(ctx, input, q_.input_zero_point);
    const Tensor w = Centered(ctx, filter, 0);
    const int32_t* in = ReadNhwc<int32_t>(ctx, x, attrs_.nchw);
    if (depthwise_) {
      DirectConv<int32_t, true>(g, in, w.as<int32_t>(), acc.as<int32_t>());
    } else {
      DirectConv<int32_t, false>(g, in, w.as<int32_t>(), acc.as<int32_t>());
    }
    Requantize(ctx, acc, g, args, output);
  }

 private:
  // |acc| (NHWC int32 sums) requantized into |output|.
  void Requantize(Context& ctx, const Tensor& acc, const Geometry& g, const QuantArgs& args, Tensor& output) {
    WithOutType(q_.tout, [&](auto out_zero) {
      WithOutType(q_.tres, [&](auto res_zero) {
        using Out = decltype(out_zero);
        using Res = decltype(res_zero);
        const Res* residual = static_cast<const Res*>(args.residual);
        if (attrs_.nchw && residual != nullptr) residual = ReadNhwc<Res>(ctx, ctx.input(q_.bias ? 3 : 2), true);
        WriteNhwc<Out>(ctx, output, attrs_.nchw, [&](Out* out) {
          RequantizeRows<Out, Res>(q_, acc.as<int32_t>(), g.batch * g.out_h * g.out_w, g.out_channels, args.bias,
                                   residual, out);
        });
      });
    });
  }

  WindowAttrs attrs_;
  bool depthwise_;
  std::vector<int64_t> pads_;
  QuantAttrs q_;
#if !defined(WEFT_CPU_LITE)
  QuantAttrs dnnl_q_ = ForDnnl(q_);
  PrimitiveCache<DnnlQConv> cache_;
  ExactInDnnl exact_;
  PrimitiveCache<DnnlConvSums> sums_cache_;
  SplitWeights split_;
#endif
};

class QMatMulKernel {
 public:
  explicit QMatMulKernel(const InitContext& init) : tb_(init.Bool("transpose_b")), q_(init, "b_scales") {}

  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    if (a.rank() != 2 || b.rank() != 2)
      Fail("a and b must be matrices, got ", DimsString(a.dims), " and ", DimsString(b.dims));
    const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(tb_ ? 0 : 1);
    if (b.dim(tb_ ? 1 : 0) != k) {
      Fail("a ", DimsString(a.dims), " and b ", DimsString(b.dims), " do not agree on the inner dimension");
    }
    q_.CheckScales(n);
    CheckTerms(k);
    Tensor c = ctx.allocate_output(0, {m, n});
    const QuantArgs args = ReadQuantArgs(ctx, q_, n, c.dims);
    if (c.num_elements == 0) return;
#if !defined(WEFT_CPU_LITE)
    const bool exact = k > 0 && exact_(b);
    if (k > 0 && !exact) ExactInDnnl::WarnLoops();
    if (exact) {
      if (DnnlQMatMul* prim = cache_.Get(Dims{m, n, k}, m, n, k, tb_, dnnl_q_, weights_)) {
        prim->Run(ctx, DnnlInput(ctx, a, dnnl_q_), b.data, args.bias, args.residual, c.data);
        return;
      }
    }
#endif
    const Tensor x = Centered(ctx, a, q_.input_zero_point);
    const Tensor w = Centered(ctx, b, 0);
    Tensor acc = ctx.allocate_temp(WEFT_DTYPE_I32, {m, n});
    const int32_t* xa = x.as<int32_t>();
    const int32_t* wb = w.as<int32_t>();
    int32_t* sums = acc.as<int32_t>();
    ParallelFor(m, n * k, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int32_t* row = sums + i * n;
        std::fill(row, row + n, 0);
        for (int64_t p = 0; p < k; ++p) {
          const int32_t v = xa[i * k + p];
          if (tb_) {
            for (int64_t j = 0; j < n; ++j) row[j] += v * wb[j * k + p];
          } else {
            const int32_t* brow = wb + p * n;
            for (int64_t j = 0; j < n; ++j) row[j] += v * brow[j];
          }
        }
      }
    });
    WithOutType(q_.tout, [&](auto out_zero) {
      WithOutType(q_.tres, [&](auto res_zero) {
        using Out = decltype(out_zero);
        using Res = decltype(res_zero);
        RequantizeRows<Out, Res>(q_, sums, m, n, args.bias, static_cast<const Res*>(args.residual), c.as<Out>());
      });
    });
  }

 private:
  bool tb_;
  QuantAttrs q_;
#if !defined(WEFT_CPU_LITE)
  QuantAttrs dnnl_q_ = ForDnnl(q_);
  WeightsPool weights_;
  PrimitiveCache<DnnlQMatMul> cache_;
  ExactInDnnl exact_;
#endif
};

}  // namespace

void RegisterQuantizeKernels(KernelRegistry& r) {
  AddKernel<"QuantizeLinear", QuantizeKernel<int8_t>, WEFT_DTYPE_I8>(r, {{"T", WEFT_DTYPE_I8}});
  AddKernel<"QuantizeLinear", QuantizeKernel<uint8_t>, WEFT_DTYPE_U8>(r, {{"T", WEFT_DTYPE_U8}});
  AddKernel<"DequantizeLinear", DequantizeKernel<int8_t>, WEFT_DTYPE_I8>(r, {{"T", WEFT_DTYPE_I8}});
  AddKernel<"DequantizeLinear", DequantizeKernel<uint8_t>, WEFT_DTYPE_U8>(r, {{"T", WEFT_DTYPE_U8}});
  AddKernel<"DequantizeLinear", DequantizeKernel<int32_t>, WEFT_DTYPE_I32>(r, {{"T", WEFT_DTYPE_I32}});
  AddKernel<"_QConv2D", QConv2DKernel>(r, {});
  AddKernel<"_QMatMul", QMatMulKernel>(r, {});
}

}  // namespace weft::cpu
