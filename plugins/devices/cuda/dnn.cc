// Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter, Softmax and
// LogSoftmax on cuDNN, f32 and f64.
//
// The convolutions run in the one configuration cuDNN supports for every
// algorithm and both types: NCHW data and KCRS filters. NHWC tensors and
// HWIO filters are transposed into temporaries on the way in and out, and
// SAME padding that is odd in total (TensorFlow puts the extra row after,
// cuDNN pads both sides alike) is done by copying the input into a larger,
// zeroed temporary. Algorithms come from cuDNN's heuristics, with the
// descriptor restricted to FMA math so that f32 results do not drop to
// TF32 on GPUs with tensor cores.
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_libraries.h"
#include "gpu/kernel_framework.h"
#include "gpu/kernels/softmax.h"
#include "gpu/launchers.h"
#include "gpu/window.h"

namespace weft::gpu {
namespace {

// The most scratch memory an algorithm may ask for; cuDNN ranks faster
// algorithms first, and those may want more.
constexpr std::size_t kMaxWorkspace = std::size_t{1} << 30;

int AsInt(int64_t v) {
  if (v > std::numeric_limits<int>::max()) Fail("dimension ", v, " is above cuDNN's limit of 2^31 - 1");
  return static_cast<int>(v);
}

template <class T>
cudnnDataType_t DataType() {
  return std::is_same_v<T, float> ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
}

// --- Descriptors -------------------------------------------------------------------

class TensorDesc {
 public:
  TensorDesc() { CheckDnn(cudnnCreateTensorDescriptor(&desc_), "cudnnCreateTensorDescriptor"); }
  ~TensorDesc() { (void)cudnnDestroyTensorDescriptor(desc_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // An NCHW tensor.
  void Set(cudnnDataType_t type, const Dims& nchw) {
    CheckDnn(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, type, AsInt(nchw[0]), AsInt(nchw[1]), AsInt(nchw[2]),
                                        AsInt(nchw[3])),
             "cudnnSetTensor4dDescriptor");
  }
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc() { CheckDnn(cudnnCreateFilterDescriptor(&desc_), "cudnnCreateFilterDescriptor"); }
  ~FilterDesc() { (void)cudnnDestroyFilterDescriptor(desc_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  // A KCRS filter.
  void Set(cudnnDataType_t type, const Dims& kcrs) {
    CheckDnn(cudnnSetFilter4dDescriptor(desc_, type, CUDNN_TENSOR_NCHW, AsInt(kcrs[0]), AsInt(kcrs[1]), AsInt(kcrs[2]),
                                        AsInt(kcrs[3])),
             "cudnnSetFilter4dDescriptor");
  }
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc() { CheckDnn(cudnnCreateConvolutionDescriptor(&desc_), "cudnnCreateConvolutionDescriptor"); }
  ~ConvDesc() { (void)cudnnDestroyConvolutionDescriptor(desc_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

// --- One convolution, in NCHW terms ----------------------------------------------------

// The shapes cuDNN sees and the copies around it.
struct ConvPlan {
  Geometry g;
  bool nchw = false;
  bool pad_explicitly = false;
  Dims x_dims;         // NCHW input as given
  Dims x_padded_dims;  // NCHW input cuDNN convolves (x_dims when not padding explicitly)
  Dims y_dims;         // NCHW output
  Dims w_dims;         // KCRS filter
};

ConvPlan PlanConv(const WindowAttrs& a, const Dims& in, const Dims& filter) {
  ConvPlan p;
  p.g = ConvGeometry(a, in, filter);
  p.nchw = a.nchw;
  p.pad_explicitly = !p.g.symmetric();
  const Geometry& g = p.g;
  p.x_dims = {g.batch, g.channels, g.in_h, g.in_w};
  p.x_padded_dims = p.x_dims;
  if (p.pad_explicitly) {
    p.x_padded_dims[2] += g.pad_top + g.pad_bottom;
    p.x_padded_dims[3] += g.pad_left + g.pad_right;
  }
  p.y_dims = {g.batch, g.out_channels, g.out_h, g.out_w};
  p.w_dims = {g.out_channels, g.channels, g.window_h, g.window_w};
  return p;
}

const std::vector<int> kNhwcToNchw = {0, 3, 1, 2};
const std::vector<int> kNchwToNhwc = {0, 2, 3, 1};
const std::vector<int> kHwioToKcrs = {3, 2, 0, 1};
const std::vector<int> kKcrsToHwio = {2, 3, 1, 0};

bool AnyEmpty(std::initializer_list<const Dims*> dims) {
  for (const Dims* d : dims) {
    if (Product(*d, 0, static_cast<int>(d->size())) == 0) return true;
  }
  return false;
}

template <class T>
class Convolution {
 public:
  Convolution(Context& ctx, const ConvPlan& plan) : ctx_(ctx), p_(plan), handle_(DnnHandle(ctx.stream_object())) {
    const cudnnDataType_t type = DataType<T>();
    x_.Set(type, p_.x_padded_dims);
    y_.Set(type, p_.y_dims);
    w_.Set(type, p_.w_dims);
    const Geometry& g = p_.g;
    const int pad_h = p_.pad_explicitly ? 0 : AsInt(g.pad_top);
    const int pad_w = p_.pad_explicitly ? 0 : AsInt(g.pad_left);
    CheckDnn(cudnnSetConvolution2dDescriptor(conv_.get(), pad_h, pad_w, AsInt(g.stride_h), AsInt(g.stride_w),
                                             AsInt(g.dilation_h), AsInt(g.dilation_w), CUDNN_CROSS_CORRELATION, type),
             "cudnnSetConvolution2dDescriptor");
    CheckDnn(cudnnSetConvolutionMathType(conv_.get(), CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
  }

  // A temporary of |dims| elements of T.
  void* Temp(const Dims& dims) { return ctx_.allocate_temp(DtypeOf<T>(), dims).ptr; }

  // |x| (the input in data_format) as cuDNN's (possibly padded) NCHW input.
  const void* PrepareInput(const Tensor& x) {
    const void* nchw = x.ptr;
    if (!p_.nchw) {
      void* t = Temp(p_.x_dims);
      EnqueueTranspose(ctx_.stream(), x.ptr, x.dims, kNhwcToNchw, sizeof(T), t);
      nchw = t;
    }
    if (!p_.pad_explicitly) return nchw;
    void* padded = Temp(p_.x_padded_dims);
    const int64_t bytes = Product(p_.x_padded_dims, 0, 4) * static_cast<int64_t>(sizeof(T));
    Check(rt::Memset(padded, 0, static_cast<std::size_t>(bytes), ctx_.stream()), "clearing the padded input");
    EnqueueCopyBox(ctx_.stream(), nchw, p_.x_dims, {0, 0, 0, 0}, padded, p_.x_padded_dims,
                   {0, 0, p_.g.pad_top, p_.g.pad_left}, p_.x_dims, sizeof(T));
    return padded;
  }

  // |filter| (HWIO) as KCRS.
  const void* PrepareFilter(const Tensor& filter) {
    void* t = Temp(p_.w_dims);
    EnqueueTranspose(ctx_.stream(), filter.ptr, filter.dims, kHwioToKcrs, sizeof(T), t);
    return t;
  }

  // |dy| (the output gradient in data_format) as NCHW.
  const void* PrepareOutputGrad(const Tensor& dy) {
    if (p_.nchw) return dy.ptr;
    void* t = Temp(p_.y_dims);
    EnqueueTranspose(ctx_.stream(), dy.ptr, dy.dims, kNhwcToNchw, sizeof(T), t);
    return t;
  }

  void* Workspace(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    return ctx_.allocate_temp(WEFT_DTYPE_U8, {static_cast<int64_t>(bytes)}).ptr;
  }

  // Runs |run|(algo, workspace, bytes) with the first algorithm in cuDNN's
  // ranking that fits here: reported usable, within kMaxWorkspace, and
  // not one that needs tensor-core math (the descriptor asks for FMA, so
  // f32 never drops to TF32). An algorithm the descriptor turns out not to
  // support is skipped for the next.
  template <class Perf, class Run>
  void RunFirstWorking(const Perf* perf, int count, const char* what, Run run) {
    for (int i = 0; i < count; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspace) continue;
      if (p.mathType != CUDNN_FMA_MATH && p.mathType != CUDNN_DEFAULT_MATH) continue;
      const cudnnStatus_t status = run(p.algo, Workspace(p.memory), p.memory);
      if (status == CUDNN_STATUS_NOT_SUPPORTED) continue;
      CheckDnn(status, what);
      return;
    }
    throw sdk::Error(WEFT_INTERNAL, Str(what, ": cuDNN offers no algorithm for an input ", DimsString(p_.x_padded_dims),
                                        " and a filter ", DimsString(p_.w_dims), " (NCHW, KCRS) with FMA math"));
  }

  void Forward(const void* x, const void* w, void* y) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    CheckDnn(cudnnGetConvolutionForwardAlgorithm_v7(handle_, x_.get(), w_.get(), conv_.get(), y_.get(),
                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf),
             "cudnnGetConvolutionForwardAlgorithm_v7");
    const T one = T(1), zero = T(0);
    RunFirstWorking(perf, count, "cudnnConvolutionForward",
                    [&](cudnnConvolutionFwdAlgo_t algo, void* workspace, std::size_t bytes) {
                      return cudnnConvolutionForward(handle_, &one, x_.get(), x, w_.get(), w, conv_.get(), algo,
                                                     workspace, bytes, &zero, y_.get(), y);
                    });
  }

  void BackwardData(const void* w, const void* dy, void* dx) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int count = 0;
    CheckDnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, w_.get(), y_.get(), conv_.get(), x_.get(),
                                                         CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf),
             "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    const T one = T(1), zero = T(0);
    RunFirstWorking(perf, count, "cudnnConvolutionBackwardData",
                    [&](cudnnConvolutionBwdDataAlgo_t algo, void* workspace, std::size_t bytes) {
                      return cudnnConvolutionBackwardData(handle_, &one, w_.get(), w, y_.get(), dy, conv_.get(), algo,
                                                          workspace, bytes, &zero, x_.get(), dx);
                    });
  }

  void BackwardFilter(const void* x, const void* dy, void* dw) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int count = 0;
    CheckDnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, x_.get(), y_.get(), conv_.get(), w_.get(),
                                                           CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf),
             "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    const T one = T(1), zero = T(0);
    RunFirstWorking(perf, count, "cudnnConvolutionBackwardFilter",
                    [&](cudnnConvolutionBwdFilterAlgo_t algo, void* workspace, std::size_t bytes) {
                      return cudnnConvolutionBackwardFilter(handle_, &one, x_.get(), x, y_.get(), dy, conv_.get(), algo,
                                                            workspace, bytes, &zero, w_.get(), dw);
                    });
  }

 private:
  Context& ctx_;
  const ConvPlan& p_;
  cudnnHandle_t handle_;
  TensorDesc x_, y_;
  FilterDesc w_;
  ConvDesc conv_;
};

void Zero(Context& ctx, const Tensor& t) {
  if (t.byte_size > 0) Check(rt::Memset(t.ptr, 0, t.byte_size, ctx.stream()), "clearing an empty convolution");
}

template <class T>
class Conv2DKernel {
 public:
  explicit Conv2DKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/true)) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), filter = ctx.input(1);
    const ConvPlan p = PlanConv(attrs_, x.dims, filter.dims);
    const Tensor y = ctx.allocate_output(0, p.g.OutputDims(attrs_.nchw));
    if (y.num_elements == 0) return;
    if (AnyEmpty({&p.x_dims, &p.w_dims})) return Zero(ctx, y);  // no input channels: zeros
    Convolution<T> conv(ctx, p);
    const void* xp = conv.PrepareInput(x);
    const void* w = conv.PrepareFilter(filter);
    void* y_nchw = attrs_.nchw ? y.ptr : conv.Temp(p.y_dims);
    conv.Forward(xp, w, y_nchw);
    if (!attrs_.nchw) EnqueueTranspose(ctx.stream(), y_nchw, p.y_dims, kNchwToNhwc, sizeof(T), y.ptr);
  }

 private:
  WindowAttrs attrs_;
};

template <class T>
class Conv2DBackpropInputKernel {
 public:
  explicit Conv2DBackpropInputKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/true)) {}
  void Compute(Context& ctx) {
    const Dims in_dims = ctx.ReadShape(ctx.input(0), "input_sizes");
    const Tensor filter = ctx.input(1), dy = ctx.input(2);
    const ConvPlan p = PlanConv(attrs_, in_dims, filter.dims);
    CheckForwardOutput(p.g, attrs_.nchw, dy.dims, "Conv2D");
    const Tensor dx = ctx.allocate_output(0, in_dims);
    if (dx.num_elements == 0) return;
    if (AnyEmpty({&p.y_dims, &p.w_dims})) return Zero(ctx, dx);
    Convolution<T> conv(ctx, p);
    const void* w = conv.PrepareFilter(filter);
    const void* g = conv.PrepareOutputGrad(dy);
    // cuDNN writes the gradient of its (padded) NCHW input; the padding's
    // share is cropped away and the layout restored.
    const bool direct = attrs_.nchw && !p.pad_explicitly;
    void* dx_padded = direct ? dx.ptr : conv.Temp(p.x_padded_dims);
    conv.BackwardData(w, g, dx_padded);
    if (direct) return;
    void* dx_nchw = dx_padded;
    if (p.pad_explicitly) {
      dx_nchw = attrs_.nchw ? dx.ptr : conv.Temp(p.x_dims);
      EnqueueCopyBox(ctx.stream(), dx_padded, p.x_padded_dims, {0, 0, p.g.pad_top, p.g.pad_left}, dx_nchw, p.x_dims,
                     {0, 0, 0, 0}, p.x_dims, sizeof(T));
    }
    if (!attrs_.nchw) EnqueueTranspose(ctx.stream(), dx_nchw, p.x_dims, kNchwToNhwc, sizeof(T), dx.ptr);
  }

 private:
  WindowAttrs attrs_;
};

template <class T>
class Conv2DBackpropFilterKernel {
 public:
  explicit Conv2DBackpropFilterKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/true)) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Dims filter_dims = ctx.ReadShape(ctx.input(1), "filter_sizes");
    const Tensor dy = ctx.input(2);
    const ConvPlan p = PlanConv(attrs_, x.dims, filter_dims);
    CheckForwardOutput(p.g, attrs_.nchw, dy.dims, "Conv2D");
    const Tensor dw = ctx.allocate_output(0, filter_dims);
    if (dw.num_elements == 0) return;
    if (AnyEmpty({&p.x_dims, &p.y_dims})) return Zero(ctx, dw);  // an empty batch: no gradient
    Convolution<T> conv(ctx, p);
    const void* xp = conv.PrepareInput(x);
    const void* g = conv.PrepareOutputGrad(dy);
    void* dw_kcrs = conv.Temp(p.w_dims);
    conv.BackwardFilter(xp, g, dw_kcrs);
    EnqueueTranspose(ctx.stream(), dw_kcrs, p.w_dims, kKcrsToHwio, sizeof(T), dw.ptr);
  }

 private:
  WindowAttrs attrs_;
};

// --- Softmax, LogSoftmax -------------------------------------------------------------

// cuDNN's softmax (gpu/kernels/softmax.h). Its CHANNEL mode normalises over
// C at every (n, h, w): the tensor is described as [outer, axis, inner, 1],
// which covers any axis.
struct DnnSoftmax {
  template <class T, bool kLog>
  static void Run(Context& ctx, const Tensor& x, const Tensor& y, const sdk::ChannelLayout& c) {
    TensorDesc desc;
    desc.Set(DataType<T>(), {c.outer, c.channels, c.inner, 1});
    const T one = T(1), zero = T(0);
    CheckDnn(cudnnSoftmaxForward(DnnHandle(ctx.stream_object()), kLog ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                 CUDNN_SOFTMAX_MODE_CHANNEL, &one, desc.get(), x.ptr, &zero, desc.get(), y.ptr),
             "cudnnSoftmaxForward");
  }
};

template <class T>
void AddDnn(KernelRegistry& r) {
  const weft_dtype_t t = DtypeOf<T>();
  r.Add<Conv2DKernel<T>>("Conv2D", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<Conv2DBackpropInputKernel<T>>("Conv2DBackpropInput", {{"T", t}}, 0, {"input_sizes"});
  r.Add<Conv2DBackpropFilterKernel<T>>("Conv2DBackpropFilter", {{"T", t}}, 0, {"filter_sizes"});
  r.Add<SoftmaxKernel<T, false, DnnSoftmax>>("Softmax", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<SoftmaxKernel<T, true, DnnSoftmax>>("LogSoftmax", {{"T", t}}, WEFT_KERNEL_INLINE);
}

}  // namespace

void RegisterDnnKernels(KernelRegistry& r) {
  ForEachType<float, double>([&](auto t) { AddDnn<decltype(t)>(r); });
}

}  // namespace weft::gpu
