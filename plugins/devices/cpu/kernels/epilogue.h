// What every convolution and fused product of the CPU kernels shares,
// whichever library runs the product (oneDNN in the full build, XNNPACK in
// the lite one, docs/lite.md): the epilogue a fused op applies after its
// product (bias, residual, activation), the fused ops' inputs and
// geometry, and the direct loops for what the library declines.
//
//   Epilogue e = Epilogue::Read(init);            // or Epilogue{} for none
//   DirectConv<float, false>(g, in, filter, out); e.Apply(...)
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_EPILOGUE_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_EPILOGUE_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "../kernel_framework.h"
#include "vector_math.h"
#include "weft/sdk/op_checks.h"
#include "window.h"

namespace weft::cpu {

// Whether |test| holds for some block of |t|'s f32 values, the blocks
// scanned in parallel (vectorised loops, vector_math.h).
template <class Test>
bool Any(const Tensor& t, Test test) {
  const float* x = t.as<float>();
  std::atomic<bool> found{false};
  ParallelFor(t.num_elements, 1, [&](int64_t begin, int64_t end) {
    if (!found.load(std::memory_order_relaxed) && test(x + begin, end - begin)) {
      found.store(true, std::memory_order_relaxed);
    }
  });
  return found.load();
}

// What a fused op does to each element after its product, in this order:
// + bias (per channel), + residual (an input of the output's shape), then
// the activation. Each step rounds to f32, as the ops it replaces do.
struct Epilogue {
  enum class Act { kNone, kRelu, kRelu6, kClip, kLeakyRelu, kElu, kSigmoid, kTanh, kSwish, kGelu, kGeluTanh };
  bool bias = false;
  bool residual = false;
  Act act = Act::kNone;
  float alpha = 0, beta = 0;

  // The fused op's bias, residual, activation, alpha and beta attrs.
  static Epilogue Read(const InitContext& init) {
    Epilogue e;
    e.bias = init.Bool("bias");
    e.residual = init.Bool("residual");
    e.alpha = static_cast<float>(init.Float("alpha"));
    e.beta = static_cast<float>(init.Float("beta"));
    const std::string a = init.String("activation");
    static const std::pair<const char*, Act> kNames[] = {
        {"None", Act::kNone},           {"Relu", Act::kRelu}, {"Relu6", Act::kRelu6},      {"Clip", Act::kClip},
        {"LeakyRelu", Act::kLeakyRelu}, {"Elu", Act::kElu},   {"Sigmoid", Act::kSigmoid},  {"Tanh", Act::kTanh},
        {"Swish", Act::kSwish},         {"Gelu", Act::kGelu}, {"GeluTanh", Act::kGeluTanh}};
    bool known = false;
    for (const auto& [name, act] : kNames) {
      if (a == name) {
        e.act = act;
        known = true;
      }
    }
    if (!known) Fail("unknown activation '", a, "'");
    if (e.act == Act::kClip && !(e.alpha <= e.beta)) Fail("Clip's bounds are reversed: ", e.alpha, " > ", e.beta);
    return e;
  }

  bool empty() const { return !bias && !residual && act == Act::kNone; }

  // Whether oneDNN's post-op computes the activation as the op it replaces
  // does for every input, infinities and NaN included. Its clip, bounded
  // Relu and logistic turn NaN into a number, hiding it, and its Relu and
  // Gelu give NaN for -inf (max(x, 0 * x)); those run in ActivateAfter
  // instead, over the output oneDNN just wrote (docs/optimizer.md).
  bool ActivationInDnnl() const {
    return act == Act::kNone || act == Act::kTanh || act == Act::kElu || act == Act::kSwish ||
           (act == Act::kLeakyRelu && alpha > 0 && std::isfinite(alpha));
  }

  // The activation oneDNN's post-ops left out (ActivationInDnnl), over the
  // |n| values at |data|, in place.
  void ActivateAfter(float* data, int64_t n) const {
    if (!ActivationInDnnl()) ActivateInPlace(data, n);
  }

  // The activation over the |n| values at |data|, in place.
  void ActivateInPlace(float* data, int64_t n) const {
    // Relu, Relu6, Clip and Gelu run loops compiled per instruction set
    // (vector_math.h); NaN fails every comparison and stays.
    auto each = [&](int64_t cost, auto fn) {
      ParallelFor(n, cost, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) data[i] = fn(data[i]);
      });
    };
    auto clamp = [&](float low, float high) {
      ParallelFor(n, 1, [&](int64_t begin, int64_t end) { ClampInPlace(data + begin, end - begin, low, high); });
    };
    switch (act) {
      case Act::kRelu: clamp(0.0f, std::numeric_limits<float>::infinity()); break;
      case Act::kRelu6: clamp(0.0f, 6.0f); break;
      case Act::kClip: clamp(alpha, beta); break;
      case Act::kGelu:
        ParallelFor(n, 2, [&](int64_t begin, int64_t end) { GeluErf(data + begin, data + begin, end - begin); });
        break;
      default: each(10, [this](float x) { return Activate(x); }); break;
    }
  }

  // The activation of one value, as the op it replaces computes it
  // (elementwise.cc): NaN stays NaN through Relu, Relu6 and Clip.
  float Activate(float x) const {
    switch (act) {
      case Act::kNone: return x;
      case Act::kRelu: return x < 0 ? 0.0f : x;
      case Act::kRelu6: return x < 0 ? 0.0f : (x > 6 ? 6.0f : x);
      case Act::kClip: return x < alpha ? alpha : (x > beta ? beta : x);
      case Act::kLeakyRelu: return x < 0 ? x * alpha : x;
      case Act::kElu: return x > 0 ? x : std::expm1(x);
      case Act::kSigmoid: return Sigmoid(x);
      case Act::kTanh: return std::tanh(x);
      case Act::kSwish: return x * Sigmoid(x);
      case Act::kGelu:
      case Act::kGeluTanh:
        if (std::isinf(x)) return x > 0 ? x : 0.0f;
        if (act == Act::kGeluTanh) {
          return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
        }
        return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
    }
    return x;
  }

  // out = act(out + bias + residual) over [outer, channels, inner] data,
  // in place; |bias| has |channels| values, |residual| out's shape.
  void Apply(float* out, const float* bias_values, const float* residual_values, int64_t outer, int64_t channels,
             int64_t inner) const {
    if (empty()) return;
    const int64_t rows = outer * channels;
    ParallelFor(rows, inner * 4, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const float b = bias && bias_values != nullptr ? bias_values[row % channels] : 0.0f;
        float* o = out + row * inner;
        const float* r = residual ? residual_values + row * inner : nullptr;
        for (int64_t i = 0; i < inner; ++i) {
          float v = o[i];
          if (bias) v = v + b;
          if (r != nullptr) v = v + r[i];
          o[i] = Activate(v);
        }
      }
    });
  }

 private:
  static float Sigmoid(float x) { return x >= 0 ? 1.0f / (1.0f + std::exp(-x)) : std::exp(x) / (1.0f + std::exp(x)); }
};

// out (of |out_dims|) = in (of |in_dims|, the same rank, each dim equal or
// 1) broadcast.
inline void BroadcastCopy(const float* in, const Dims& in_dims, float* out, const Dims& out_dims) {
  const std::size_t rank = out_dims.size();
  std::vector<int64_t> in_strides(rank, 0);
  int64_t stride = 1;
  for (std::size_t i = rank; i-- > 0;) {
    in_strides[i] = in_dims[i] == 1 ? 0 : stride;
    stride *= in_dims[i];
  }
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat, offset = 0;
    for (std::size_t i = rank; i-- > 0;) {
      offset += (rest % out_dims[i]) * in_strides[i];
      rest /= out_dims[i];
    }
    out[flat] = in[offset];
  }
}

// The inputs after the two operands: the bias and the residual, as the
// epilogue asks for them.
struct FusedArgs {
  Tensor bias, residual;
};

inline FusedArgs ReadFusedArgs(Context& ctx, const Epilogue& e, int64_t channels, const Dims& output) {
  FusedArgs args;
  int next = 2;
  if (e.bias) {
    args.bias = ctx.input(next++);
    if (args.bias.rank() != 1 || args.bias.dim(0) != channels) {
      Fail("the bias has shape ", DimsString(args.bias.dims), " but the output has ", channels, " channels");
    }
  }
  if (e.residual) {
    args.residual = ctx.input(next++);
    const Dims& r = args.residual.dims;
    bool fits = r.size() == output.size();
    for (std::size_t i = 0; fits && i < r.size(); ++i) fits = r[i] == output[i] || r[i] == 1;
    if (!fits) {
      Fail("the residual added after the product has shape ", DimsString(r), " and the product ", DimsString(output),
           ": the Add this node replaced would have broadcast the product to a larger shape, which the fused op "
           "does not; run with --optimize 1 (or [graph_optimizer] disable = [\"conv_fusion\", \"matmul_fusion\"]) "
           "(docs/optimizer.md)");
    }
    if (r != output) {
      // A residual of 1 where the output is wider (a batch left open in
      // the graph): broadcast it, as Add did.
      Tensor wide = ctx.allocate_temp(WEFT_DTYPE_F32, output);
      BroadcastCopy(args.residual.as<float>(), r, wide.as<float>(), output);
      args.residual = wide;
    }
  }
  return args;
}

// _FusedMatMul's attributes, as both builds' kernels read them.
struct FusedMatMulAttrs {
  explicit FusedMatMulAttrs(const InitContext& init)
      : ta(init.Bool("transpose_a")),
        tb(init.Bool("transpose_b")),
        constant_b(init.Bool("constant_b")),
        epilogue(Epilogue::Read(init)) {}
  bool ta, tb, constant_b;
  Epilogue epilogue;
};

// A _FusedMatMul's operands: a and b checked as matrices, c [m, n]
// allocated, the bias and residual the epilogue asks for read (null when
// it does not). Nothing is left to compute when c has no element.
struct FusedMatMulCall {
  FusedMatMulCall(Context& ctx, const FusedMatMulAttrs& attrs) : a(ctx.input(0)), b(ctx.input(1)) {
    if (a.rank() != 2 || b.rank() != 2) {
      Fail("a and b must be matrices, got ", DimsString(a.dims), " and ", DimsString(b.dims));
    }
    const sdk::MatMulShape shape = sdk::MatMulDims(a.dims, b.dims, attrs.ta, attrs.tb);
    m = shape.m;
    k = shape.k;
    n = shape.n;
    c = ctx.allocate_output(0, {m, n});
    args = ReadFusedArgs(ctx, attrs.epilogue, n, c.dims);
    if (attrs.epilogue.bias) bias = args.bias.as<float>();
    if (attrs.epilogue.residual) residual = args.residual.as<float>();
  }
  Tensor a, b, c;
  int64_t m = 0, k = 0, n = 0;
  FusedArgs args;  // holds a residual broadcast to c's shape
  const float* bias = nullptr;
  const float* residual = nullptr;
};

// _FusedConv2D's explicit_paddings attr: empty, or [top, bottom, left,
// right].
inline std::vector<int64_t> ReadExplicitPaddings(const InitContext& init) {
  std::vector<int64_t> pads = init.Ints("explicit_paddings");
  if (!pads.empty() && pads.size() != 4) Fail("explicit_paddings must have 4 entries, got ", pads.size());
  return pads;
}

// _FusedConv2D's geometry, with the explicit |pads| when the op has them:
// VALID over the padded input, with the pads as the window's own.
inline Geometry FusedConvGeometry(const WindowAttrs& attrs, const std::vector<int64_t>& pads, const Dims& input,
                                  const Dims& filter, bool depthwise) {
  if (pads.empty()) return ConvGeometry(attrs, input, filter, depthwise);
  if (input.size() != 4) Fail("the input must have rank 4, got ", DimsString(input));
  const std::size_t h = attrs.nchw ? 2 : 1, w = attrs.nchw ? 3 : 2;
  Dims padded = input;
  padded[h] += pads[0] + pads[1];
  padded[w] += pads[2] + pads[3];
  Geometry g = ConvGeometry(attrs, padded, filter, depthwise);
  g.in_h = input[h];
  g.in_w = input[w];
  g.pad_top = pads[0];
  g.pad_bottom = pads[1];
  g.pad_left = pads[2];
  g.pad_right = pads[3];
  return g;
}

// out[n, oh, ow, o] = sum over (kh, kw, c) of in[n, ih, iw, c] * filter[kh, kw, c, o]
// with ih = oh * stride - pad + kh * dilation (likewise iw), for NHWC data and
// an HWIO filter; depthwise with multiplier M, out[n, oh, ow, c * M + m] =
// sum over (kh, kw) of in[n, ih, iw, c] * filter[kh, kw, c, m]. One output
// row per task; the innermost loop runs along the contiguous output
// channels.
template <class T, bool kDepthwise>
void DirectConv(const Geometry& g, const T* input, const T* filter, T* output) {
  const int64_t row_size = g.out_w * g.out_channels;
  const int64_t multiplier = kDepthwise ? g.out_channels / std::max<int64_t>(g.channels, 1) : 0;
  const int64_t tap_size = kDepthwise ? g.out_channels : g.channels * g.out_channels;  // filter elements per tap
  const int64_t cost = std::max<int64_t>(row_size * g.window_h * g.window_w * (kDepthwise ? 1 : g.channels) / 4, 1);
  ParallelFor(g.batch * g.out_h, cost, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / g.out_h, oh = row % g.out_h;
      T* out_row = output + row * row_size;
      std::fill(out_row, out_row + row_size, T(0));
      for (int64_t kh = 0; kh < g.window_h; ++kh) {
        const int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
        if (ih < 0 || ih >= g.in_h) continue;
        const T* in_row = input + (n * g.in_h + ih) * g.in_w * g.channels;
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          T* acc = out_row + ow * g.out_channels;
          for (int64_t kw = 0; kw < g.window_w; ++kw) {
            const int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
            if (iw < 0 || iw >= g.in_w) continue;
            const T* pixel = in_row + iw * g.channels;
            const T* taps = filter + (kh * g.window_w + kw) * tap_size;
            if constexpr (!kDepthwise) {
              for (int64_t c = 0; c < g.channels; ++c) {
                const T x = pixel[c];
                const T* f = taps + c * g.out_channels;
                for (int64_t o = 0; o < g.out_channels; ++o) acc[o] += x * f[o];
              }
            } else if (multiplier == 1) {
              for (int64_t c = 0; c < g.channels; ++c) acc[c] += pixel[c] * taps[c];
            } else {
              for (int64_t c = 0; c < g.channels; ++c) {
                const T x = pixel[c];
                for (int64_t m = 0; m < multiplier; ++m) acc[c * multiplier + m] += x * taps[c * multiplier + m];
              }
            }
          }
        }
      }
    }
  });
}

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_EPILOGUE_H_
