// The graph optimizer's fused ops on the CPU (docs/optimizer.md):
// _FusedConv2D and _FusedMatMul, f32. oneDNN runs the product with the
// bias, residual and activation as its post-ops, so each output element is
// written once; what oneDNN declines runs the direct loops (conv_util.h) or
// the blocked gemm, then the epilogue in one pass.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <mutex>

#include "../kernel_framework.h"
#include "conv_util.h"
#include "dnnl_util.h"
#include "gemm.h"
#include "vector_math.h"
#include "window.h"

namespace weft::cpu {
namespace {

class FusedConv2DKernel {
 public:
  explicit FusedConv2DKernel(const InitContext& init)
      : attrs_(ReadWindowAttrs(init, /*dilations=*/true)),
        depthwise_(init.Bool("depthwise")),
        constant_filter_(init.Bool("constant_filter")),
        winograd_(init.Bool("winograd")),
        pads_(ReadExplicitPaddings(init)),
        epilogue_(Epilogue::Read(init)) {}

  void Compute(Context& ctx) {
    const Tensor input = ctx.input(0), filter = ctx.input(1);
    const Geometry g = FusedConvGeometry(attrs_, pads_, input.dims, filter.dims, depthwise_);
    Tensor output = ctx.allocate_output(0, g.OutputDims(attrs_.nchw));
    const FusedArgs args = ReadFusedArgs(ctx, epilogue_, g.out_channels, output.dims);
    if (output.num_elements == 0) return;
    const auto* bias = epilogue_.bias ? args.bias.as<float>() : nullptr;
    const auto* residual = epilogue_.residual ? args.residual.as<float>() : nullptr;
    if (g.channels > 0) {
      Dims key = input.dims;
      key.insert(key.end(), filter.dims.begin(), filter.dims.end());
      DnnlConvolution* conv = nullptr;
      if (winograd_) {
        // Winograd's transforms mix a tile's inputs, so one infinity or
        // NaN would spread to outputs the direct sum keeps finite (inf -
        // inf): such data runs the direct convolution. The scans run only
        // where oneDNN has a Winograd convolution for this shape; where it
        // declined, the entry is the direct convolution itself.
        DnnlConvolution* winograd = winograd_cache_.Get(key, g, attrs_.nchw, depthwise_, epilogue_, true);
        if (winograd != nullptr &&
            (!winograd->winograd() || (Finite(filter, constant_filter_) && !AnyNonFiniteIn(input)))) {
          conv = winograd;
        }
      }
      if (conv == nullptr) conv = cache_.Get(key, g, attrs_.nchw, depthwise_, epilogue_, false);
      if (conv != nullptr) {
        conv->Run(ctx, input.data, filter.data, bias, residual, output.data, output.num_elements, constant_filter_);
        return;
      }
      const float* in = ReadNhwc<float>(ctx, input, attrs_.nchw);
      WriteNhwc<float>(ctx, output, attrs_.nchw, [&](float* out) {
        if (depthwise_) {
          DirectConv<float, true>(g, in, filter.as<float>(), out);
        } else {
          DirectConv<float, false>(g, in, filter.as<float>(), out);
        }
      });
    } else {
      std::fill(output.as<float>(), output.as<float>() + output.num_elements, 0.0f);  // an empty sum
    }
    const int64_t spatial = g.out_h * g.out_w;
    if (attrs_.nchw) {
      epilogue_.Apply(output.as<float>(), bias, residual, g.batch, g.out_channels, spatial);
    } else {
      epilogue_.Apply(output.as<float>(), bias, residual, g.batch * spatial, g.out_channels, 1);
    }
  }

 private:
  static bool AnyNonFiniteIn(const Tensor& t) {
    return Any(t, [](const float* x, int64_t n) { return AnyNonFinite(x, n); });
  }

  // Whether every value of |filter| is finite; a constant filter is
  // scanned once per buffer.
  bool Finite(const Tensor& filter, bool constant) {
    if (!constant) return !AnyNonFiniteIn(filter);
    std::lock_guard<std::mutex> lock(mutex_);
    if (scanned_filter_ != filter.data) {
      filter_finite_ = !AnyNonFiniteIn(filter);
      scanned_filter_ = filter.data;
    }
    return filter_finite_;
  }

  WindowAttrs attrs_;
  bool depthwise_, constant_filter_, winograd_;
  std::vector<int64_t> pads_;
  Epilogue epilogue_;
  PrimitiveCache<DnnlConvolution> cache_, winograd_cache_;
  std::mutex mutex_;
  const void* scanned_filter_ = nullptr;
  bool filter_finite_ = false;
};

// An f32 oneDNN matmul with the epilogue as bias and post-ops, for one
// (m, n, k), created once. With constant b oneDNN picks b's layout, and b
// reordered into it is kept (ReorderedWeights, dnnl_util.h), one copy for
// every m that chose the same layout (WeightsPool): at the BERT encoder's
// sizes the product takes about a sixth less time than from b as stored
// (BENCHMARKS.md).
class DnnlFusedMatMul {
 public:
  DnnlFusedMatMul(int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool constant_b, const Epilogue& epilogue,
                  WeightsPool& pool)
      : epilogue_(epilogue), elements_(m * n), bias_(epilogue.bias) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    a_md_ = dnnl::memory::desc({m, k}, dt::f32, ta ? tag::ba : tag::ab);
    b_md_ = dnnl::memory::desc({k, n}, dt::f32, tb ? tag::ba : tag::ab);
    c_md_ = dnnl::memory::desc({m, n}, dt::f32, tag::ab);
    const dnnl::memory::desc weights = constant_b ? dnnl::memory::desc({k, n}, dt::f32, tag::any) : b_md_;
    if (bias_) bias_md_ = dnnl::memory::desc({1, n}, dt::f32, tag::ab);
    auto make_pd = [&](bool binary) {
      dnnl::primitive_attr attr = WithUserScratchpad();
      attr.set_post_ops(PostOps(epilogue, binary ? &c_md_ : nullptr));
      return dnnl::matmul::primitive_desc(
          bias_ ? dnnl::matmul::desc(a_md_, weights, bias_md_, c_md_) : dnnl::matmul::desc(a_md_, weights, c_md_), attr,
          Engine());
    };
    const dnnl::matmul::primitive_desc pd = WithResidual(epilogue, make_pd, residual_binary_);
    primitive_ = dnnl::matmul(pd);
    weights_ = pool.For(b_md_, pd.weights_desc());
  }

  // c = epilogue(a b + bias + residual).
  void Run(const void* a, const void* b, const void* bias, const void* residual, void* c) const {
    UseIntraOpThreads();
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, dnnl::memory(a_md_, Engine(), const_cast<void*>(a))},
        {DNNL_ARG_WEIGHTS, weights_->as_given() ? dnnl::memory(b_md_, Engine(), const_cast<void*>(b))
                                                : weights_->Get(b, /*constant=*/true)},
        {DNNL_ARG_DST, dnnl::memory(c_md_, Engine(), c)}};
    PassResidual(epilogue_, residual_binary_, c_md_, residual, c, args);
    if (bias_) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md_, Engine(), const_cast<void*>(bias)));
    Execute(primitive_, std::move(args));
    epilogue_.ActivateAfter(static_cast<float*>(c), elements_);
  }

 private:
  Epilogue epilogue_;
  int64_t elements_;
  bool bias_;
  bool residual_binary_ = false;  // the residual is a binary post-op (else a sum)
  dnnl::memory::desc a_md_, b_md_, c_md_, bias_md_;
  dnnl::matmul primitive_;
  std::shared_ptr<ReorderedWeights> weights_;  // as_given() unless b is constant; shared across shapes
};

class FusedMatMulKernel {
 public:
  explicit FusedMatMulKernel(const InitContext& init) : attrs_(init) {}

  void Compute(Context& ctx) {
    const FusedMatMulCall call(ctx, attrs_);
    if (call.c.num_elements == 0) return;
    const int64_t m = call.m, k = call.k, n = call.n;
    if (k > 0) {
      if (const DnnlFusedMatMul* prim =
              cache_.Get(Dims{m, n, k}, m, n, k, attrs_.ta, attrs_.tb, attrs_.constant_b, attrs_.epilogue, weights_)) {
        prim->Run(call.a.data, call.b.data, call.bias, call.residual, call.c.data);
        return;
      }
    }
    Gemm<float>(gemm_, call.a.as<float>(), call.b.as<float>(), call.c.as<float>(), m, n, k, attrs_.ta, attrs_.tb);
    attrs_.epilogue.Apply(call.c.as<float>(), call.bias, call.residual, m, n, 1);
  }

 private:
  FusedMatMulAttrs attrs_;
  WeightsPool weights_;  // b reordered, shared by the cache's primitives
  PrimitiveCache<DnnlFusedMatMul> cache_;
  GemmCache gemm_;
};

}  // namespace

void RegisterFusedKernels(KernelRegistry& r) {
  r.Add<FusedConv2DKernel>("_FusedConv2D", {{"T", WEFT_DTYPE_F32}});
  r.Add<FusedMatMulKernel>("_FusedMatMul", {{"T", WEFT_DTYPE_F32}});
}

}  // namespace weft::cpu
