// What the convolution kernels (nn_conv.cc) and the optimizer's fused ops
// (nn_fused.cc) share: the epilogue a fused op applies after its product
// (bias, residual, activation), the f32 oneDNN convolution with that
// epilogue as post-ops, and the direct loops for what oneDNN declines.
//
//   Epilogue e = Epilogue::Read(init);            // or Epilogue{} for none
//   DnnlConvolution* conv = cache.Get(key, g, nchw, depthwise, e);
//   conv->Run(input, filter, bias, output, elements, constant_filter);
//   // or: DirectConv<float, false>(g, in, filter, out); e.Apply(...)
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_CONV_UTIL_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_CONV_UTIL_H_

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../kernel_framework.h"
#include "dnnl_util.h"
#include "window.h"

namespace weft::cpu {

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

  // oneDNN post-ops doing what Apply does after the bias (which oneDNN adds
  // itself): a sum with what dst holds (the residual, copied there first),
  // then the activation when ActivationInDnnl().
  dnnl::post_ops PostOps() const {
    dnnl::post_ops ops;
    if (residual) ops.append_sum(1.0f);
    using A = dnnl::algorithm;
    switch (ActivationInDnnl() ? act : Act::kNone) {
      case Act::kTanh: ops.append_eltwise(1.0f, A::eltwise_tanh, 0.0f, 0.0f); break;
      case Act::kElu: ops.append_eltwise(1.0f, A::eltwise_elu, 1.0f, 0.0f); break;
      case Act::kSwish: ops.append_eltwise(1.0f, A::eltwise_swish, 1.0f, 0.0f); break;
      case Act::kLeakyRelu: ops.append_eltwise(1.0f, A::eltwise_relu, alpha, 0.0f); break;
      default: break;
    }
    return ops;
  }

  // The activation oneDNN's post-ops left out (ActivationInDnnl), over the
  // |n| values at |data|, in place.
  void ActivateAfter(float* data, int64_t n) const {
    if (ActivationInDnnl()) return;
    // One loop per activation, the test outside it, so that the clamps
    // vectorise; NaN fails every comparison and stays.
    auto each = [&](int64_t cost, auto fn) {
      ParallelFor(n, cost, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) data[i] = fn(data[i]);
      });
    };
    const float low = act == Act::kClip ? alpha : 0.0f, high = act == Act::kClip ? beta : 6.0f;
    switch (act) {
      case Act::kRelu: each(1, [](float x) { return x < 0 ? 0.0f : x; }); break;
      case Act::kRelu6:
      case Act::kClip: each(1, [low, high](float x) { return x < low ? low : (x > high ? high : x); }); break;
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

// An f32 oneDNN (depthwise) convolution for one geometry and epilogue,
// created once. oneDNN picks the weights' layout (plain HWIO weights would
// send it to a gemm-based implementation two to three times slower); the
// filter reordered into it is kept and reused while the filter is
// unchanged: while its buffer is the same when the op promises a constant
// filter, else while its bytes are (a comparison costs less than a reorder,
// which is a parallel region of its own). A depthwise filter [H, W, C, M]
// is a grouped convolution of C groups of M outputs each.
class DnnlConvolution {
 public:
  DnnlConvolution(const Geometry& g, bool nchw, bool depthwise, const Epilogue& epilogue) : epilogue_(epilogue) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const int64_t multiplier = depthwise ? g.out_channels / std::max<int64_t>(g.channels, 1) : 0;
    const dnnl::memory::dims weights_dims =
        depthwise ? dnnl::memory::dims{g.channels, multiplier, 1, g.window_h, g.window_w}
                  : dnnl::memory::dims{g.out_channels, g.channels, g.window_h, g.window_w};
    src_md_ = DataDesc(g.batch, g.channels, g.in_h, g.in_w, nchw);
    dst_md_ = DataDesc(g.batch, g.out_channels, g.out_h, g.out_w, nchw);
    if (depthwise) {
      // HWCM: (kh, kw, c, m) at ((kh * W + kw) * C + c) * M + m.
      const int64_t cm = g.channels * multiplier;
      filter_md_ = dnnl::memory::desc(
          weights_dims, dt::f32, dnnl::memory::dims{multiplier, 1, cm * g.window_h * g.window_w, g.window_w * cm, cm});
    } else {
      filter_md_ = dnnl::memory::desc(weights_dims, dt::f32, tag::hwio);
    }
    const dnnl::memory::desc any_weights(weights_dims, dt::f32, tag::any);
    const dnnl::memory::dims strides = {g.stride_h, g.stride_w};
    const dnnl::memory::dims dilations = {g.dilation_h - 1, g.dilation_w - 1};
    const dnnl::memory::dims pad_before = {g.pad_top, g.pad_left}, pad_after = {g.pad_bottom, g.pad_right};
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto algorithm = dnnl::algorithm::convolution_direct;
    auto make_desc = [&](const dnnl::memory::desc& weights) {
      return epilogue.bias ? dnnl::convolution_forward::desc(prop, algorithm, src_md_, weights, bias_md_, dst_md_,
                                                             strides, dilations, pad_before, pad_after)
                           : dnnl::convolution_forward::desc(prop, algorithm, src_md_, weights, dst_md_, strides,
                                                             dilations, pad_before, pad_after);
    };
    if (epilogue.bias) bias_md_ = dnnl::memory::desc({g.out_channels}, dt::f32, tag::x);
    dnnl::primitive_attr attr;
    attr.set_post_ops(epilogue.PostOps());
    dnnl::convolution_forward::primitive_desc pd(make_desc(any_weights), attr, Engine());
    weights_md_ = pd.weights_desc();
    primitive_ = dnnl::convolution_forward(pd);
    if (weights_md_ != filter_md_) {
      reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), filter_md_, Engine(), weights_md_));
    }
  }

  // output = epilogue(conv(input, filter) + bias); with a residual epilogue
  // |output| must hold the residual already. |elements| is the output's
  // size.
  void Run(const void* input, const void* filter, const void* bias, void* output, int64_t elements,
           bool constant_filter) {
    UseIntraOpThreads();
    dnnl::stream& stream = Stream();
    dnnl::memory src(src_md_, Engine(), const_cast<void*>(input));
    dnnl::memory dst(dst_md_, Engine(), output);
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    if (epilogue_.bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md_, Engine(), const_cast<void*>(bias)));
    std::shared_ptr<const Reordered> reordered;
    if (weights_md_ == filter_md_) {
      args.emplace(DNNL_ARG_WEIGHTS, dnnl::memory(filter_md_, Engine(), const_cast<void*>(filter)));
    } else {
      reordered = Weights(filter, stream, constant_filter);
      args.emplace(DNNL_ARG_WEIGHTS, reordered->weights);
    }
    primitive_.execute(stream, args);
    stream.wait();
    epilogue_.ActivateAfter(static_cast<float*>(output), elements);
  }

 private:
  struct Reordered {
    const void* source = nullptr;       // the buffer they came from
    std::vector<unsigned char> filter;  // its bytes, unless the filter is constant
    dnnl::memory weights;
  };

  // The reordered weights of |filter|, from an earlier call while it is
  // unchanged. Shared so a concurrent call may replace them while this one
  // still runs with them.
  std::shared_ptr<const Reordered> Weights(const void* filter, dnnl::stream& stream, bool constant_filter) {
    const auto* bytes = static_cast<const unsigned char*>(filter);
    const std::size_t size = filter_md_.get_size();
    std::lock_guard<std::mutex> lock(mutex_);
    const bool same =
        reordered_ != nullptr &&
        (constant_filter ? reordered_->source == filter : std::memcmp(reordered_->filter.data(), bytes, size) == 0);
    if (!same) {
      auto fresh = std::make_shared<Reordered>();
      fresh->source = filter;
      if (!constant_filter) fresh->filter.assign(bytes, bytes + size);
      fresh->weights = dnnl::memory(weights_md_, Engine());
      dnnl::memory user(filter_md_, Engine(), const_cast<void*>(filter));
      reorder_.execute(stream, user, fresh->weights);
      stream.wait();
      reordered_ = std::move(fresh);
    }
    return reordered_;
  }

  Epilogue epilogue_;
  dnnl::memory::desc src_md_, dst_md_, filter_md_, weights_md_, bias_md_;
  dnnl::convolution_forward primitive_;
  dnnl::reorder reorder_;
  std::mutex mutex_;
  std::shared_ptr<const Reordered> reordered_;
};

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

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_CONV_UTIL_H_
