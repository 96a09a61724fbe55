// The kernel families shared by the cuda and hip plugins: f32 elementwise
// ops, Sum, BiasAdd and SparseSoftmaxCrossEntropyWithLogits, over the
// launchers of gpu_launch.h. Shapes the kernels do not cover (general
// broadcasting, a Sum over scattered axes) are refused by the placement
// query, so such nodes run on another device.
#include <algorithm>
#include <cmath>

#include "gpu_kernels.h"
#include "gpu_launch.h"

namespace weft::gpu {
namespace {

int64_t Product(const Dims& dims, std::size_t begin, std::size_t end) {
  int64_t p = 1;
  for (std::size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

bool AllOnes(const Dims& dims) {
  return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d == 1; });
}

// The output shape of a binary op the kernels support: equal shapes, or a
// single-element operand whose rank does not exceed the other's. Empty
// when unsupported.
bool BinaryShape(const Dims& a, const Dims& b, Dims* out) {
  if (a == b) {
    *out = a;
    return true;
  }
  if (AllOnes(b) && b.size() <= a.size()) {
    *out = a;
    return true;
  }
  if (AllOnes(a) && a.size() <= b.size()) {
    *out = b;
    return true;
  }
  return false;
}

weft_status_t BinaryQuery(weft_device_t, const weft_kernel_init_t* init, weft_kernel_query_t* out) {
  return sdk::Guard([&] {
    Dims a;
    Dims b;
    Dims y;
    if (!KnownShape(init, 0, &a) || !KnownShape(init, 1, &b)) return;
    const bool unknown = std::count(a.begin(), a.end(), -1) + std::count(b.begin(), b.end(), -1) > 0;
    if (!unknown && !BinaryShape(a, b, &y)) {
      out->unsupported = 1;
      out->reason = "the GPU kernel broadcasts only equal shapes or a single-element operand";
    }
  });
}

class UnaryKernel {
 public:
  UnaryKernel(const InitContext&, launch::UnaryOp op) : op_(op) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.allocate_output(0, x.dims);
    ctx.Check(launch::Unary(op_, x.f32(), y.f32(), x.num_elements, ctx.stream()), "launching");
  }

 private:
  launch::UnaryOp op_;
};

template <launch::UnaryOp kOp>
class Unary : public UnaryKernel {
 public:
  explicit Unary(const InitContext& init) : UnaryKernel(init, kOp) {}
};

template <launch::BinaryOp kOp>
class Binary {
 public:
  explicit Binary(const InitContext&) {}
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0);
    const Tensor b = ctx.input(1);
    Dims dims;
    if (!BinaryShape(a.dims, b.dims, &dims)) {
      throw sdk::Error(WEFT_UNIMPLEMENTED,
                       Str(ctx.node_name(), ": the GPU kernel cannot broadcast ", DimsString(a.dims),
                           " with ", DimsString(b.dims),
                           " (only equal shapes or a single-element operand)"));
    }
    const Tensor y = ctx.allocate_output(0, dims);
    ctx.Check(launch::Binary(kOp, a.f32(), a.num_elements, b.f32(), b.num_elements, y.f32(),
                             y.num_elements, ctx.stream()),
              "launching");
  }
};

class ReluGradKernel {
 public:
  explicit ReluGradKernel(const InitContext&) {}
  void Compute(Context& ctx) {
    const Tensor g = ctx.input(0);
    const Tensor f = ctx.input(1);
    if (g.dims != f.dims) {
      Fail(ctx.node_name(), ": gradients ", DimsString(g.dims), " and features ",
           DimsString(f.dims), " must have one shape");
    }
    const Tensor y = ctx.allocate_output(0, g.dims);
    ctx.Check(launch::ReluGrad(g.f32(), f.f32(), y.f32(), g.num_elements, ctx.stream()),
              "launching");
  }
};

// Which axes a Sum reduces, as [first, last) of one contiguous run (every
// axis when the attr is empty). False when the axes are not contiguous.
bool ReducedRun(const std::vector<int64_t>& axes, int64_t rank, int64_t* first, int64_t* last,
                std::string* error) {
  if (axes.empty()) {
    *first = 0;
    *last = rank;
    return true;
  }
  std::vector<int64_t> norm;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      *error = Str("axis ", a, " is out of range for rank ", rank);
      return false;
    }
    norm.push_back(a < 0 ? a + rank : a);
  }
  std::sort(norm.begin(), norm.end());
  norm.erase(std::unique(norm.begin(), norm.end()), norm.end());
  if (norm.back() - norm.front() + 1 != static_cast<int64_t>(norm.size())) {
    *error = "the GPU kernel reduces one contiguous run of axes only";
    return false;
  }
  *first = norm.front();
  *last = norm.back() + 1;
  return true;
}

weft_status_t SumQuery(weft_device_t, const weft_kernel_init_t* init, weft_kernel_query_t* out) {
  return sdk::Guard([&] {
    Dims x;
    if (!KnownShape(init, 0, &x)) return;
    const InitContext ic(nullptr, init);
    int64_t first = 0;
    int64_t last = 0;
    std::string error;
    if (!ReducedRun(ic.Ints("axis"), static_cast<int64_t>(x.size()), &first, &last, &error)) {
      out->unsupported = 1;
      out->reason = "the GPU Sum kernel reduces one contiguous run of valid axes only";
    }
  });
}

class SumKernel {
 public:
  explicit SumKernel(const InitContext& init)
      : axes_(init.Ints("axis")), keep_dims_(init.Bool("keep_dims")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const int64_t rank = x.rank();
    int64_t first = 0;
    int64_t last = 0;
    std::string error;
    if (!ReducedRun(axes_, rank, &first, &last, &error)) {
      throw sdk::Error(error.rfind("axis", 0) == 0 ? WEFT_INVALID_ARGUMENT : WEFT_UNIMPLEMENTED,
                       Str(ctx.node_name(), ": ", error, " (input ", DimsString(x.dims), ")"));
    }
    Dims out;
    for (int64_t i = 0; i < rank; ++i) {
      if (i < first || i >= last) {
        out.push_back(x.dim(static_cast<int>(i)));
      } else if (keep_dims_) {
        out.push_back(1);
      }
    }
    const Tensor y = ctx.allocate_output(0, out);
    const auto f = static_cast<std::size_t>(first);
    const auto l = static_cast<std::size_t>(last);
    ctx.Check(launch::Sum(x.f32(), y.f32(), Product(x.dims, 0, f), Product(x.dims, f, l),
                          Product(x.dims, l, x.dims.size()), ctx.stream()),
              "launching");
  }

 private:
  std::vector<int64_t> axes_;
  bool keep_dims_;
};

class BiasAddKernel {
 public:
  explicit BiasAddKernel(const InitContext& init) : nchw_(init.String("data_format") == "NCHW") {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor bias = ctx.input(1);
    if (x.rank() < 2 || bias.rank() != 1) {
      Fail(ctx.node_name(), ": BiasAdd needs value of rank >= 2 and a 1-D bias, got ",
           DimsString(x.dims), " and ", DimsString(bias.dims));
    }
    const int channel_axis = nchw_ ? 1 : x.rank() - 1;
    const int64_t channels = x.dim(channel_axis);
    if (bias.dim(0) != channels) {
      Fail(ctx.node_name(), ": bias has ", bias.dim(0), " elements but value ", DimsString(x.dims),
           " has ", channels, " channels (", nchw_ ? "NCHW" : "NHWC", ")");
    }
    const Tensor y = ctx.allocate_output(0, x.dims);
    const auto c = static_cast<std::size_t>(channel_axis);
    ctx.Check(launch::BiasAdd(x.f32(), bias.f32(), y.f32(), Product(x.dims, 0, c), channels,
                              Product(x.dims, c + 1, x.dims.size()), ctx.stream()),
              "launching");
  }

 private:
  bool nchw_;
};

class SparseXentKernel {
 public:
  explicit SparseXentKernel(const InitContext&) {}
  void Compute(Context& ctx) {
    const Tensor logits = ctx.input(0);
    const Tensor labels = ctx.input(1);
    if (logits.rank() != 2 || labels.rank() != 1 || labels.dim(0) != logits.dim(0)) {
      Fail(ctx.node_name(), ": features must be [batch, classes] and labels [batch], got ",
           DimsString(logits.dims), " and ", DimsString(labels.dims));
    }
    const int64_t batch = logits.dim(0);
    const int64_t classes = logits.dim(1);
    const Tensor loss = ctx.allocate_output(0, {batch});
    const Tensor back = ctx.allocate_output(1, logits.dims);
    if (batch == 0) return;
    const Tensor bad = ctx.allocate_temp(WEFT_DTYPE_I64, {1});
    const gpuStream_t stream = ctx.stream();
    ctx.Check(gpuMemsetAsync(bad.ptr, 0xff, sizeof(int64_t), stream), "clearing the bad-label flag");
    ctx.Check(launch::SparseXent(logits.f32(), labels.ptr, labels.dtype == WEFT_DTYPE_I64,
                                 loss.f32(), back.f32(), batch, classes,
                                 static_cast<int64_t*>(bad.ptr), stream),
              "launching");
    // The op promises an error naming the row of a bad label, so the flag
    // is read back (one small synchronous copy per step).
    int64_t bad_row = -1;
    ctx.Check(gpuMemcpyAsync(&bad_row, bad.ptr, sizeof bad_row, gpuMemcpyDeviceToHost, stream),
              "reading the bad-label flag");
    ctx.Check(gpuStreamSynchronize(stream), "waiting for the cross entropy");
    if (bad_row >= 0) {
      Fail(ctx.node_name(), ": label of row ", bad_row, " is outside [0, ", classes, ")");
    }
  }
};

}  // namespace

void RegisterElementwiseKernels(KernelRegistry& r) {
  using launch::BinaryOp;
  using launch::UnaryOp;
  const KernelRegistry::Constraints f32 = {{"T", WEFT_DTYPE_F32}};
  r.Add<Unary<UnaryOp::kNeg>>("Neg", f32);
  r.Add<Unary<UnaryOp::kExp>>("Exp", f32);
  r.Add<Unary<UnaryOp::kLog>>("Log", f32);
  r.Add<Unary<UnaryOp::kSqrt>>("Sqrt", f32);
  r.Add<Unary<UnaryOp::kRelu>>("Relu", f32);
  r.Add<Unary<UnaryOp::kTanh>>("Tanh", f32);
  r.Add<Unary<UnaryOp::kSigmoid>>("Sigmoid", f32);
  r.Add<Binary<BinaryOp::kAdd>>("Add", f32, 0, BinaryQuery);
  r.Add<Binary<BinaryOp::kSub>>("Sub", f32, 0, BinaryQuery);
  r.Add<Binary<BinaryOp::kMul>>("Mul", f32, 0, BinaryQuery);
  r.Add<Binary<BinaryOp::kDiv>>("RealDiv", f32, 0, BinaryQuery);
  r.Add<ReluGradKernel>("ReluGrad", f32);
}

void RegisterReductionKernels(KernelRegistry& r) {
  r.Add<SumKernel>("Sum", {{"T", WEFT_DTYPE_F32}}, 0, SumQuery);
}

void RegisterNnKernels(KernelRegistry& r) {
  r.Add<BiasAddKernel>("BiasAdd", {{"T", WEFT_DTYPE_F32}});
  r.Add<SparseXentKernel>("SparseSoftmaxCrossEntropyWithLogits", {{"T", WEFT_DTYPE_F32}});
}

}  // namespace weft::gpu
