// What the convolution kernels (nn_conv.cc) and the optimizer's fused ops
// (nn_fused.cc) share in the full build: the epilogue (epilogue.h) as
// oneDNN post-ops, and the f32 oneDNN convolution with them.
//
//   Epilogue e = Epilogue::Read(init);            // or Epilogue{} for none
//   DnnlConvolution* conv = cache.Get(key, g, nchw, depthwise, e);
//   conv->Run(ctx, input, filter, bias, residual, output, elements, constant_filter);
//   // or: DirectConv<float, false>(g, in, filter, out); e.Apply(...)
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_CONV_UTIL_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_CONV_UTIL_H_

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../kernel_framework.h"
#include "dnnl_util.h"
#include "epilogue.h"
#include "vector_math.h"
#include "window.h"

namespace weft::cpu {

// oneDNN post-ops doing what Epilogue::Apply does after the bias (which oneDNN adds
// itself): the residual, then the activation when ActivationInDnnl().
// With |residual_md| the residual is a binary add of a tensor of that
// desc (post-op 0, read where it is); without, a sum with what dst holds
// (the residual, copied there first). Either adds in f32, as Add does.
inline dnnl::post_ops PostOps(const Epilogue& e, const dnnl::memory::desc* residual_md = nullptr) {
  dnnl::post_ops ops;
  if (e.residual && residual_md != nullptr) {
    ops.append_binary(dnnl::algorithm::binary_add, *residual_md);
  } else if (e.residual) {
    ops.append_sum(1.0f);
  }
  using A = dnnl::algorithm;
  switch (e.ActivationInDnnl() ? e.act : Epilogue::Act::kNone) {
    case Epilogue::Act::kTanh: ops.append_eltwise(1.0f, A::eltwise_tanh, 0.0f, 0.0f); break;
    case Epilogue::Act::kElu: ops.append_eltwise(1.0f, A::eltwise_elu, 1.0f, 0.0f); break;
    case Epilogue::Act::kSwish: ops.append_eltwise(1.0f, A::eltwise_swish, 1.0f, 0.0f); break;
    case Epilogue::Act::kLeakyRelu: ops.append_eltwise(1.0f, A::eltwise_relu, e.alpha, 0.0f); break;
    default: break;
  }
  return ops;
}

// The primitive desc |make_pd(binary)| gives with the epilogue's residual
// as a binary post-op (|binary| true: no copy of the residual into dst
// first) where oneDNN keeps the same implementation for it, else as a sum:
// for convolutions a binary post-op can move oneDNN from brgconv to a
// slower jit kernel. Sets |binary| to what it chose.
template <class MakePd>
auto WithResidual(const Epilogue& epilogue, MakePd make_pd, bool& binary) -> decltype(make_pd(false)) {
  auto pd = make_pd(false);
  binary = false;
  if (!epilogue.residual) return pd;
  try {
    auto with_binary = make_pd(true);
    if (std::string(with_binary.impl_info_str()) == pd.impl_info_str()) {
      binary = true;
      return with_binary;
    }
  } catch (const dnnl::error&) {
    // declined: the sum it is
  }
  return pd;
}

// The residual's part of a run, as WithResidual chose (|binary|): the
// binary post-op's argument in |args|, or the residual copied into |dst|
// for the sum. Nothing without a residual.
inline void PassResidual(const Epilogue& epilogue, bool binary, const dnnl::memory::desc& md, const void* residual,
                         void* dst, std::unordered_map<int, dnnl::memory>& args) {
  if (binary) {
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                 dnnl::memory(md, Engine(), const_cast<void*>(residual)));
  } else if (epilogue.residual) {
    std::memcpy(dst, residual, md.get_size());
  }
}

// A convolution's filter as Weft holds it, HWIO, or HWCM for a depthwise
// one (C groups of M outputs each, (kh, kw, c, m) at ((kh * W + kw) * C +
// c) * M + m), in oneDNN's terms: [O, I, H, W] or [C, M, 1, H, W].
inline dnnl::memory::desc FilterDesc(const Geometry& g, bool depthwise, dnnl::memory::data_type dt) {
  if (!depthwise) {
    return dnnl::memory::desc({g.out_channels, g.channels, g.window_h, g.window_w}, dt, dnnl::memory::format_tag::hwio);
  }
  const int64_t multiplier = g.out_channels / std::max<int64_t>(g.channels, 1);
  const int64_t cm = g.channels * multiplier;
  return dnnl::memory::desc({g.channels, multiplier, 1, g.window_h, g.window_w}, dt,
                            dnnl::memory::dims{multiplier, 1, cm * g.window_h * g.window_w, g.window_w * cm, cm});
}

// |desc|'s dims and type in the layout the primitive chooses.
inline dnnl::memory::desc AnyLayout(const dnnl::memory::desc& desc) {
  return dnnl::memory::desc(desc.dims(), desc.data_type(), dnnl::memory::format_tag::any);
}

// An f32 oneDNN (depthwise) convolution for one geometry and epilogue,
// created once. oneDNN picks the weights' layout (plain HWIO weights would
// send it to a gemm-based implementation two to three times slower); the
// filter reordered into it is kept while it is unchanged (ReorderedWeights,
// dnnl_util.h). A depthwise filter [H, W, C, M]
// is a grouped convolution of C groups of M outputs each.
//
// With |winograd| (the op allows it) a 3x3 convolution of stride and
// dilation 1 runs oneDNN's Winograd convolution where oneDNN has one for
// the geometry: in the blocked layout oneDNN picks for it, the input (and
// the residual) reordered into that layout and the output back, in temps
// of the kernel. At ResNet-18's sizes the three together take 0.45-0.85 of
// the direct convolution's time (BENCHMARKS.md); results differ from the
// direct sum by about 1e-6 of the output's largest magnitude
// (docs/optimizer.md).
class DnnlConvolution {
 public:
  DnnlConvolution(const Geometry& g, bool nchw, bool depthwise, const Epilogue& epilogue, bool winograd = false)
      : epilogue_(epilogue) {
    using dt = dnnl::memory::data_type;
    src_md_ = DataDesc(g.batch, g.channels, g.in_h, g.in_w, nchw);
    dst_md_ = DataDesc(g.batch, g.out_channels, g.out_h, g.out_w, nchw);
    filter_md_ = FilterDesc(g, depthwise, dt::f32);
    const dnnl::memory::desc any_weights = AnyLayout(filter_md_);
    const dnnl::memory::dims strides = {g.stride_h, g.stride_w};
    const dnnl::memory::dims dilations = {g.dilation_h - 1, g.dilation_w - 1};
    const dnnl::memory::dims pad_before = {g.pad_top, g.pad_left}, pad_after = {g.pad_bottom, g.pad_right};
    const auto prop = dnnl::prop_kind::forward_inference;
    auto make_desc = [&](const dnnl::memory::desc& weights) {
      return epilogue.bias
                 ? dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, src_md_, weights,
                                                   bias_md_, dst_md_, strides, dilations, pad_before, pad_after)
                 : dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, src_md_, weights, dst_md_,
                                                   strides, dilations, pad_before, pad_after);
    };
    if (epilogue.bias) bias_md_ = dnnl::memory::desc({g.out_channels}, dt::f32, dnnl::memory::format_tag::x);
    if (winograd && !depthwise && !nchw && g.window_h == 3 && g.window_w == 3 && g.stride_h == 1 && g.stride_w == 1 &&
        g.dilation_h == 1 && g.dilation_w == 1 && TryWinograd(g, any_weights, pad_before, pad_after)) {
      return;
    }
    auto make_pd = [&](bool binary) {
      dnnl::primitive_attr attr = WithUserScratchpad();
      attr.set_post_ops(PostOps(epilogue, binary ? &dst_md_ : nullptr));
      return dnnl::convolution_forward::primitive_desc(make_desc(any_weights), attr, Engine());
    };
    const dnnl::convolution_forward::primitive_desc pd = WithResidual(epilogue, make_pd, residual_binary_);
    primitive_ = dnnl::convolution_forward(pd);
    weights_ = std::make_unique<ReorderedWeights>(filter_md_, pd.weights_desc());
  }

  // output = epilogue(conv(input, filter) + bias + residual), the residual
  // (of the output's shape) with a residual epilogue. |elements| is the
  // output's size. Temps come from |ctx|.
  void Run(Context& ctx, const void* input, const void* filter, const void* bias, const void* residual, void* output,
           int64_t elements, bool constant_filter) {
    UseIntraOpThreads();
    dnnl::memory src(src_md_, Engine(), const_cast<void*>(input));
    dnnl::memory dst(dst_md_, Engine(), output);
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    if (blocked_) {
      // Into the blocked layout, the convolution there (the residual in
      // dst for the sum), and back.
      args[DNNL_ARG_SRC] = TempMemory(ctx, blocked_src_md_);
      args[DNNL_ARG_DST] = TempMemory(ctx, blocked_dst_md_);
      Execute(to_blocked_, src, args[DNNL_ARG_SRC]);
      if (epilogue_.residual) {
        Execute(residual_to_blocked_, dnnl::memory(dst_md_, Engine(), const_cast<void*>(residual)), args[DNNL_ARG_DST]);
      }
    } else {
      PassResidual(epilogue_, residual_binary_, dst_md_, residual, output, args);
    }
    if (epilogue_.bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md_, Engine(), const_cast<void*>(bias)));
    args.emplace(DNNL_ARG_WEIGHTS, weights_->as_given() ? dnnl::memory(filter_md_, Engine(), const_cast<void*>(filter))
                                                        : weights_->Get(filter, constant_filter));
    Execute(primitive_, args);
    if (blocked_) Execute(from_blocked_, args[DNNL_ARG_DST], dst);
    epilogue_.ActivateAfter(static_cast<float*>(output), elements);
  }

  // Whether the convolution runs as Winograd's, in a blocked layout.
  bool winograd() const { return blocked_; }

 private:
  // The Winograd convolution, if oneDNN has one for |g| with this epilogue
  // (the residual as a sum); false (oneDNN has none) changes nothing.
  bool TryWinograd(const Geometry& g, const dnnl::memory::desc& weights, const dnnl::memory::dims& pad_before,
                   const dnnl::memory::dims& pad_after) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc src_any({g.batch, g.channels, g.in_h, g.in_w}, dt::f32, tag::any);
    const dnnl::memory::desc dst_any({g.batch, g.out_channels, g.out_h, g.out_w}, dt::f32, tag::any);
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto algorithm = dnnl::algorithm::convolution_winograd;
    dnnl::primitive_attr attr = WithUserScratchpad();
    attr.set_post_ops(PostOps(epilogue_));
    try {
      // Everything made first, and kept only when all of it exists.
      const dnnl::convolution_forward::primitive_desc pd(
          epilogue_.bias ? dnnl::convolution_forward::desc(prop, algorithm, src_any, weights, bias_md_, dst_any, {1, 1},
                                                           pad_before, pad_after)
                         : dnnl::convolution_forward::desc(prop, algorithm, src_any, weights, dst_any, {1, 1},
                                                           pad_before, pad_after),
          attr, Engine());
      dnnl::reorder to_blocked = MakeReorder(src_md_, pd.src_desc());
      dnnl::reorder residual_to_blocked = MakeReorder(dst_md_, pd.dst_desc());
      dnnl::reorder from_blocked = MakeReorder(pd.dst_desc(), dst_md_);
      auto weights_copy = std::make_unique<ReorderedWeights>(filter_md_, pd.weights_desc());
      primitive_ = dnnl::convolution_forward(pd);
      blocked_src_md_ = pd.src_desc();
      blocked_dst_md_ = pd.dst_desc();
      to_blocked_ = std::move(to_blocked);
      residual_to_blocked_ = std::move(residual_to_blocked);
      from_blocked_ = std::move(from_blocked);
      weights_ = std::move(weights_copy);
    } catch (const dnnl::error&) {
      return false;  // no Winograd here: the direct convolution
    }
    blocked_ = true;
    return true;
  }

  Epilogue epilogue_;
  bool residual_binary_ = false;  // the residual is a binary post-op (else a sum)
  bool blocked_ = false;          // Winograd's, in the blocked layout below
  dnnl::memory::desc src_md_, dst_md_, filter_md_, bias_md_;
  dnnl::memory::desc blocked_src_md_, blocked_dst_md_;
  dnnl::reorder to_blocked_, residual_to_blocked_, from_blocked_;
  dnnl::convolution_forward primitive_;
  std::unique_ptr<ReorderedWeights> weights_;
};

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_CONV_UTIL_H_
