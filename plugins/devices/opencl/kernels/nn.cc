// Softmax, LogSoftmax, SoftmaxCrossEntropyWithLogits,
// SparseSoftmaxCrossEntropyWithLogits (f32, f64; labels i32 or i64) and
// BiasAdd (f32, f64, i32, i64), from nn.cl.
#include <string_view>

#include "../kernel_framework.h"

namespace weft::opencl {
namespace {

class SoftmaxKernel {
 public:
  explicit SoftmaxKernel(const InitContext& init)
      : log_(std::string_view(init.op()) == "LogSoftmax"),
        axis_(init.Int("axis")),
        program_(&ProgramFor(init.device(), "nn", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const sdk::ChannelLayout c = sdk::ChannelLayoutOf(x, sdk::SoftmaxAxis(x, axis_));
    const int64_t outer = c.outer, inner = c.inner;
    const Tensor y = ctx.allocate_output(0, x.dims);
    if (y.num_elements == 0) return;
    Launch(ctx, *program_, "softmax")
        .Buf(x)
        .Buf(y)
        .Val<cl_ulong>(outer * inner)
        .Val<cl_ulong>(c.channels)
        .Val<cl_ulong>(inner)
        .Val<cl_int>(log_ ? 1 : 0)
        .Run(outer * inner);
  }

 private:
  bool log_;
  int64_t axis_;
  Program* program_;
};

// SoftmaxCrossEntropyWithLogits, and SparseSoftmaxCrossEntropyWithLogits
// (labels i32 or i64): a work-item per row of features.
class XentKernel {
 public:
  explicit XentKernel(const InitContext& init)
      : sparse_(std::string_view(init.op()) == "SparseSoftmaxCrossEntropyWithLogits"),
        kernel_(!sparse_                                ? "softmax_xent"
                : init.input_dtype(1) == WEFT_DTYPE_I64 ? "sparse_softmax_xent_i64"
                                                        : "sparse_softmax_xent_i32"),
        program_(&ProgramFor(init.device(), "nn", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor features = ctx.input(0), labels = ctx.input(1);
    const sdk::XentShape s = sparse_ ? sdk::CheckSparseXent(features, labels) : sdk::CheckXent(features, labels);
    if (sparse_) {
      // A label out of range is an error naming its row, so the labels are
      // checked on the host (a few bytes per row) before the kernel reads
      // features at them.
      const std::vector<int64_t> values = ctx.ReadInts(labels);
      for (int64_t i = 0; i < s.batch; ++i) sdk::CheckLabel(values[static_cast<std::size_t>(i)], i, s.classes);
    }
    const Tensor loss = ctx.allocate_output(0, {s.batch});
    const Tensor backprop = ctx.allocate_output(1, features.dims);
    Launch(ctx, *program_, kernel_)
        .Buf(features)
        .Buf(labels)
        .Buf(loss)
        .Buf(backprop)
        .Val<cl_ulong>(s.batch)
        .Val<cl_ulong>(s.classes)
        .Run(s.batch);
  }

 private:
  bool sparse_;
  const char* kernel_;
  Program* program_;
};

class BiasAddKernel {
 public:
  explicit BiasAddKernel(const InitContext& init)
      : nchw_(sdk::IsNchw(init)), program_(&ProgramFor(init.device(), "nn", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor value = ctx.input(0), bias = ctx.input(1);
    const sdk::ChannelLayout c = sdk::CheckBiasAdd(value, bias, nchw_);
    const Tensor y = ctx.allocate_output(0, value.dims);
    Launch(ctx, *program_, "bias_add")
        .Buf(value)
        .Buf(bias)
        .Buf(y)
        .Val<cl_ulong>(y.num_elements)
        .Val<cl_ulong>(c.channels)
        .Val<cl_ulong>(c.inner)
        .Run(y.num_elements);
  }

 private:
  bool nchw_;
  Program* program_;
};

}  // namespace

void RegisterNnKernels(KernelRegistry& r) {
  for (weft_dtype_t t : {WEFT_DTYPE_F32, WEFT_DTYPE_F64}) {
    r.Add<SoftmaxKernel>("Softmax", {{"T", t}});
    r.Add<SoftmaxKernel>("LogSoftmax", {{"T", t}});
    r.Add<XentKernel>("SoftmaxCrossEntropyWithLogits", {{"T", t}});
    r.Add<XentKernel>("SparseSoftmaxCrossEntropyWithLogits", {{"T", t}, {"Tlabels", WEFT_DTYPE_I32}});
    r.Add<XentKernel>("SparseSoftmaxCrossEntropyWithLogits", {{"T", t}, {"Tlabels", WEFT_DTYPE_I64}});
  }
  for (weft_dtype_t t : {WEFT_DTYPE_F32, WEFT_DTYPE_F64, WEFT_DTYPE_I32, WEFT_DTYPE_I64}) {
    r.Add<BiasAddKernel>("BiasAdd", {{"T", t}});
  }
}

}  // namespace weft::opencl
