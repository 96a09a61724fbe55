// Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter, MaxPool, AvgPool,
// MaxPoolGrad and AvgPoolGrad (conv.cl), f32 and f64, NHWC or NCHW, SAME or
// VALID padding, any strides and (for the convolutions) dilations, with
// TensorFlow's semantics. The window geometry and its checks are the SDK's
// (weft/sdk/window.h), as on every device.
//
// NHWC convolutions are matrix products (matmul.cl) over the input's column
// matrix (im2col): the output is col x filter, the filter's gradient col^T x
// dy, the input's gradient col2im(dy x filter^T); that is some ten times
// faster on PoCL than the direct loops, which serve NCHW data and column
// matrices too large to hold (over kMaxColumnBytes).
#include <algorithm>
#include <string_view>

#include "matmul.h"
#include "weft/sdk/size.h"
#include "weft/sdk/window.h"

namespace weft::opencl {
namespace {

// The window geometry is the SDK's (weft/sdk/window.h), shared by every
// device plugin.
using sdk::ConvGeometry;
using sdk::Geometry;
using sdk::PoolGeometry;
using sdk::ReadWindowAttrs;
using sdk::WindowAttrs;

// The int16 the kernels of conv.cl take.
cl_int16 Packed(const Geometry& geometry, bool nchw) {
  const Geometry& g = geometry;
  const int64_t values[16] = {g.batch,        g.in_h,     g.in_w,     g.channels,  g.out_h,    g.out_w,
                              g.out_channels, g.window_h, g.window_w, g.stride_h,  g.stride_w, g.dilation_h,
                              g.dilation_w,   g.pad_top,  g.pad_left, nchw ? 1 : 0};
  cl_int16 packed{};
  for (int i = 0; i < 16; ++i) {
    if (values[i] > INT32_MAX) Fail("a dimension of ", values[i], " is too large for the OpenCL kernels (2^31 - 1)");
    packed.s[i] = static_cast<cl_int>(values[i]);
  }
  return packed;
}

// The 4 dims a *_sizes input holds, checked.
Dims ReadSizes(Context& ctx, const Tensor& t, const char* what) {
  if (t.rank() != 1 || t.num_elements != 4) {
    Fail(what, " must be a 1-D tensor of 4 elements, got shape ", DimsString(t.dims));
  }
  const Dims dims = ctx.ReadInts(t);
  for (int64_t d : dims) {
    if (d < 0) Fail(what, " ", DimsString(dims), " has a negative entry");
  }
  return dims;
}

void CheckGradShape(const char* what, const Tensor& t, const Dims& want, const std::string& because) {
  if (t.dims != want) Fail(what, " has shape ", DimsString(t.dims), ", but ", because, " gives ", DimsString(want));
}

// The largest column matrix an NHWC convolution builds; beyond it, the
// direct loops run.
constexpr uint64_t kMaxColumnBytes = uint64_t{512} << 20;

// The column matrix of |g| (rows N*OH*OW, columns KH*KW*C) as a temp, or
// an empty tensor when the data is NCHW or the matrix is too large.
bool UseColumns(Context& ctx, const Geometry& g, bool nchw, weft_dtype_t dtype, Tensor* col) {
  if (nchw) return false;
  const uint64_t rows = static_cast<uint64_t>(g.batch * g.out_h * g.out_w);
  const uint64_t cols = static_cast<uint64_t>(g.window_h * g.window_w * g.channels);
  if (rows * cols * weft_dtype_size(dtype) > kMaxColumnBytes) return false;
  *col = ctx.allocate_temp(dtype, {static_cast<int64_t>(rows), static_cast<int64_t>(cols)});
  return true;
}

// One matrix, no batch.
BroadcastPlan<2> Single() { return PlanBroadcast2({1}, {1}, {1}); }

// Zeros |t| (a gradient nothing flows into).
void Zero(Context& ctx, const Tensor& t) {
  if (t.byte_size == 0) return;
  const unsigned char zero = 0;
  ctx.device().Check(clEnqueueFillBuffer(ctx.queue(), t.mem, &zero, 1, t.offset, t.byte_size, 0, nullptr, nullptr),
                     "clEnqueueFillBuffer");
}

// Launches the window kernel |kernel| over the elements of |out|, reading
// |ins|, with the geometry |g| of |nchw| or NHWC data.
void LaunchWindow(Context& ctx, Program& program, const char* kernel, std::initializer_list<const Tensor*> ins,
                  const Tensor& out, const Geometry& g, bool nchw) {
  Launch launch(ctx, program, kernel);
  for (const Tensor* in : ins) launch.Buf(*in);
  launch.Buf(out).Val(Packed(g, nchw)).Val<cl_ulong>(out.num_elements).Run(out.num_elements);
}

// What a window kernel holds: its attrs (ksize for a pooling, whose
// window is an attr), and the conv and matmul programs for the dtype of
// its input |typed|.
struct WindowPrograms {
  WindowPrograms(const InitContext& init, bool convolution, int typed)
      : attrs(ReadWindowAttrs(init, /*dilations=*/convolution, /*ksize=*/!convolution)),
        conv(&ProgramFor(init.device(), "conv", init.input_dtype(typed))),
        matmul(convolution ? &ProgramFor(init.device(), "matmul", init.input_dtype(typed)) : nullptr) {}

  WindowAttrs attrs;
  Program* conv;
  Program* matmul;
};

class Conv2DKernel {
 public:
  explicit Conv2DKernel(const InitContext& init) : p_(init, true, 0) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), filter = ctx.input(1);
    const Geometry g = ConvGeometry(p_.attrs, x.dims, filter.dims);
    const Tensor y = ctx.allocate_output(0, g.OutputDims(p_.attrs.nchw));
    if (y.num_elements == 0) return;
    Tensor col;
    if (x.num_elements > 0 && UseColumns(ctx, g, p_.attrs.nchw, x.dtype, &col)) {
      LaunchWindow(ctx, *p_.conv, "im2col", {&x}, col, g, false);
      Multiply(ctx, *p_.matmul, col, filter, y, col.dim(0), g.out_channels, col.dim(1), false, false, Single(), 1);
      return;
    }
    LaunchWindow(ctx, *p_.conv, "conv2d", {&x, &filter}, y, g, p_.attrs.nchw);
  }

 private:
  WindowPrograms p_;
};

class ConvBackpropInputKernel {
 public:
  explicit ConvBackpropInputKernel(const InitContext& init) : p_(init, true, 1) {}
  void Compute(Context& ctx) {
    const Tensor sizes = ctx.input(0), filter = ctx.input(1), dy = ctx.input(2);
    const Dims in_dims = ReadSizes(ctx, sizes, "input_sizes");
    const Geometry g = ConvGeometry(p_.attrs, in_dims, filter.dims);
    CheckGradShape("out_backprop", dy, g.OutputDims(p_.attrs.nchw),
                   Str("Conv2D of an input ", DimsString(in_dims), " with a filter ", DimsString(filter.dims)));
    const Tensor dx = ctx.allocate_output(0, in_dims);
    if (dx.num_elements == 0) return;
    if (dy.num_elements == 0) return Zero(ctx, dx);
    Tensor col;
    if (UseColumns(ctx, g, p_.attrs.nchw, dy.dtype, &col)) {
      // dcol = dy x filter^T, the filter as [KH*KW*C, OC].
      Multiply(ctx, *p_.matmul, dy, filter, col, col.dim(0), col.dim(1), g.out_channels, false, true, Single(), 1);
      LaunchWindow(ctx, *p_.conv, "col2im", {&col}, dx, g, false);
      return;
    }
    LaunchWindow(ctx, *p_.conv, "conv2d_backprop_input", {&filter, &dy}, dx, g, p_.attrs.nchw);
  }

 private:
  WindowPrograms p_;
};

class ConvBackpropFilterKernel {
 public:
  explicit ConvBackpropFilterKernel(const InitContext& init) : p_(init, true, 0) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), sizes = ctx.input(1), dy = ctx.input(2);
    const Dims filter_dims = ReadSizes(ctx, sizes, "filter_sizes");
    const Geometry g = ConvGeometry(p_.attrs, x.dims, filter_dims);
    CheckGradShape("out_backprop", dy, g.OutputDims(p_.attrs.nchw),
                   Str("Conv2D of an input ", DimsString(x.dims), " with a filter ", DimsString(filter_dims)));
    const Tensor df = ctx.allocate_output(0, filter_dims);
    if (df.num_elements == 0) return;
    if (dy.num_elements == 0) return Zero(ctx, df);
    Tensor col;
    if (UseColumns(ctx, g, p_.attrs.nchw, x.dtype, &col)) {
      // dfilter = col^T x dy, as [KH*KW*C, OC].
      LaunchWindow(ctx, *p_.conv, "im2col", {&x}, col, g, false);
      Multiply(ctx, *p_.matmul, col, dy, df, col.dim(1), g.out_channels, col.dim(0), true, false, Single(), 1);
      return;
    }
    LaunchWindow(ctx, *p_.conv, "conv2d_backprop_filter", {&x, &dy}, df, g, p_.attrs.nchw);
  }

 private:
  WindowPrograms p_;
};

class PoolKernel {
 public:
  explicit PoolKernel(const InitContext& init) : max_(std::string_view(init.op()) == "MaxPool"), p_(init, false, 0) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Geometry g = PoolGeometry(p_.attrs, x.dims);
    const Tensor y = ctx.allocate_output(0, g.OutputDims(p_.attrs.nchw));
    if (y.num_elements == 0) return;
    Launch(ctx, *p_.conv, "pool")
        .Buf(x)
        .Buf(y)
        .Val(Packed(g, p_.attrs.nchw))
        .Val<cl_ulong>(y.num_elements)
        .Val<cl_int>(max_ ? 1 : 0)
        .Run(y.num_elements);
  }

 private:
  bool max_;
  WindowPrograms p_;
};

class MaxPoolGradKernel {
 public:
  explicit MaxPoolGradKernel(const InitContext& init) : p_(init, false, 0) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), y = ctx.input(1), dy = ctx.input(2);
    const Geometry g = PoolGeometry(p_.attrs, x.dims);
    const std::string because = Str("MaxPool of orig_input ", DimsString(x.dims));
    CheckGradShape("orig_output", y, g.OutputDims(p_.attrs.nchw), because);
    CheckGradShape("grad", dy, g.OutputDims(p_.attrs.nchw), because);
    const Tensor dx = ctx.allocate_output(0, x.dims);
    if (dx.num_elements == 0) return;
    LaunchWindow(ctx, *p_.conv, "max_pool_grad", {&x, &dy}, dx, g, p_.attrs.nchw);
  }

 private:
  WindowPrograms p_;
};

class AvgPoolGradKernel {
 public:
  explicit AvgPoolGradKernel(const InitContext& init) : p_(init, false, 1) {}
  void Compute(Context& ctx) {
    const Tensor sizes = ctx.input(0), dy = ctx.input(1);
    const Dims in_dims = ReadSizes(ctx, sizes, "orig_input_shape");
    const Geometry g = PoolGeometry(p_.attrs, in_dims);
    CheckGradShape("grad", dy, g.OutputDims(p_.attrs.nchw), Str("AvgPool of an input ", DimsString(in_dims)));
    const Tensor dx = ctx.allocate_output(0, in_dims);
    if (dx.num_elements == 0) return;
    LaunchWindow(ctx, *p_.conv, "avg_pool_grad", {&dy}, dx, g, p_.attrs.nchw);
  }

 private:
  WindowPrograms p_;
};

}  // namespace

void RegisterConvKernels(KernelRegistry& r) {
  for (weft_dtype_t t : {WEFT_DTYPE_F32, WEFT_DTYPE_F64}) {
    r.Add<Conv2DKernel>("Conv2D", {{"T", t}});
    r.Add<PoolKernel>("MaxPool", {{"T", t}});
    r.Add<PoolKernel>("AvgPool", {{"T", t}});
    r.Add<MaxPoolGradKernel>("MaxPoolGrad", {{"T", t}});
    for (weft_dtype_t shape : {WEFT_DTYPE_I32, WEFT_DTYPE_I64}) {
      r.Add<ConvBackpropInputKernel>("Conv2DBackpropInput", {{"T", t}, {"Tshape", shape}}, 0, {"input_sizes"});
      r.Add<ConvBackpropFilterKernel>("Conv2DBackpropFilter", {{"T", t}, {"Tshape", shape}}, 0, {"filter_sizes"});
      r.Add<AvgPoolGradKernel>("AvgPoolGrad", {{"T", t}, {"Tshape", shape}}, 0, {"orig_input_shape"});
    }
  }
}

}  // namespace weft::opencl
