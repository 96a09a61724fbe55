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
    const int rank = x.rank();
    if (rank < 1) Fail("logits must have rank >= 1");
    if (axis_ < -rank || axis_ >= rank) {
      Fail("axis ", axis_, " is out of range for rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")");
    }
    const int axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < rank; ++i) {
      if (i < axis) outer *= x.dim(i);
      if (i > axis) inner *= x.dim(i);
    }
    const Tensor y = ctx.allocate_output(0, x.dims);
    if (y.num_elements == 0) return;
    Launch(ctx, *program_, "softmax")
        .Buf(x)
        .Buf(y)
        .Val<cl_ulong>(outer * inner)
        .Val<cl_ulong>(x.dim(axis))
        .Val<cl_ulong>(inner)
        .Val<cl_int>(log_ ? 1 : 0)
        .Run(outer * inner);
  }

 private:
  bool log_;
  int64_t axis_;
  Program* program_;
};

void CheckFeatures(const Tensor& features) {
  if (features.rank() != 2) Fail("features must be [batch, classes], got ", DimsString(features.dims));
}

class SoftmaxXentKernel {
 public:
  explicit SoftmaxXentKernel(const InitContext& init)
      : program_(&ProgramFor(init.device(), "nn", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor features = ctx.input(0), labels = ctx.input(1);
    CheckFeatures(features);
    if (labels.dims != features.dims) {
      Fail("labels ", DimsString(labels.dims), " must have the shape of features ", DimsString(features.dims));
    }
    const int64_t batch = features.dim(0), classes = features.dim(1);
    const Tensor loss = ctx.allocate_output(0, {batch});
    const Tensor backprop = ctx.allocate_output(1, features.dims);
    Launch(ctx, *program_, "softmax_xent")
        .Buf(features)
        .Buf(labels)
        .Buf(loss)
        .Buf(backprop)
        .Val<cl_ulong>(batch)
        .Val<cl_ulong>(classes)
        .Run(batch);
  }

 private:
  Program* program_;
};

class SparseSoftmaxXentKernel {
 public:
  explicit SparseSoftmaxXentKernel(const InitContext& init)
      : wide_(init.input_dtype(1) == WEFT_DTYPE_I64), program_(&ProgramFor(init.device(), "nn", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor features = ctx.input(0), labels = ctx.input(1);
    CheckFeatures(features);
    if (labels.rank() != 1) Fail("labels must be [batch], got ", DimsString(labels.dims));
    const int64_t batch = features.dim(0), classes = features.dim(1);
    if (labels.dim(0) != batch) Fail("labels has ", labels.dim(0), " rows, features ", batch);
    // A label out of range is an error naming its row, so the labels are
    // checked on the host (a few bytes per row) before the kernel reads
    // features at them.
    const std::vector<int64_t> values = ctx.ReadInts(labels);
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t label = values[static_cast<std::size_t>(i)];
      if (label < 0 || label >= classes) Fail("label ", label, " of row ", i, " is out of range [0, ", classes, ")");
    }
    const Tensor loss = ctx.allocate_output(0, {batch});
    const Tensor backprop = ctx.allocate_output(1, features.dims);
    Launch(ctx, *program_, wide_ ? "sparse_softmax_xent_i64" : "sparse_softmax_xent_i32")
        .Buf(features)
        .Buf(labels)
        .Buf(loss)
        .Buf(backprop)
        .Val<cl_ulong>(batch)
        .Val<cl_ulong>(classes)
        .Run(batch);
  }

 private:
  bool wide_;
  Program* program_;
};

class BiasAddKernel {
 public:
  explicit BiasAddKernel(const InitContext& init)
      : nchw_(init.String("data_format") == "NCHW"), program_(&ProgramFor(init.device(), "nn", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor value = ctx.input(0), bias = ctx.input(1);
    if (value.rank() < 2) Fail("value must have rank >= 2, got ", DimsString(value.dims));
    if (bias.rank() != 1) Fail("bias must be 1-D, got ", DimsString(bias.dims));
    const int axis = nchw_ ? 1 : value.rank() - 1;
    const int64_t channels = value.dim(axis);
    if (bias.dim(0) != channels) {
      Fail("bias has ", bias.dim(0), " elements but value has ", channels, " channels (", DimsString(value.dims), ", ",
           nchw_ ? "NCHW" : "NHWC", ")");
    }
    int64_t inner = 1;
    for (int i = axis + 1; i < value.rank(); ++i) inner *= value.dim(i);
    const Tensor y = ctx.allocate_output(0, value.dims);
    Launch(ctx, *program_, "bias_add")
        .Buf(value)
        .Buf(bias)
        .Buf(y)
        .Val<cl_ulong>(y.num_elements)
        .Val<cl_ulong>(channels)
        .Val<cl_ulong>(inner)
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
    r.Add<SoftmaxXentKernel>("SoftmaxCrossEntropyWithLogits", {{"T", t}});
    r.Add<SparseSoftmaxXentKernel>("SparseSoftmaxCrossEntropyWithLogits", {{"T", t}, {"Tlabels", WEFT_DTYPE_I32}});
    r.Add<SparseSoftmaxXentKernel>("SparseSoftmaxCrossEntropyWithLogits", {{"T", t}, {"Tlabels", WEFT_DTYPE_I64}});
  }
  for (weft_dtype_t t : {WEFT_DTYPE_F32, WEFT_DTYPE_F64, WEFT_DTYPE_I32, WEFT_DTYPE_I64}) {
    r.Add<BiasAddKernel>("BiasAdd", {{"T", t}});
  }
}

}  // namespace weft::opencl
