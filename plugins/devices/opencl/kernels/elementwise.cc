// Elementwise kernels (elementwise.cl, cast.cl): unary math, binary
// arithmetic and comparisons with NumPy broadcasting, the activation
// derivatives, Select, ClipByValue, AddN, Cast, Fill, ZerosLike, OnesLike,
// BroadcastTo and Transpose (a strided copy like BroadcastTo's).
//
// Dtypes (the constraints registered below): floats are f32 and f64 (f64
// on devices with cl_khr_fp64); integer arithmetic is i32 and i64 and
// wraps; comparisons, Select, Fill, BroadcastTo and the *Like ops also take
// bool. Integer Div, FloorDiv, FloorMod and Pow, and the 8/16-bit types
// have no OpenCL kernel (the host runs them elsewhere).
#include <algorithm>
#include <cstring>
#include <map>
#include <string_view>

#include "../kernel_framework.h"

namespace weft::opencl {
namespace {

constexpr weft_dtype_t kF32 = WEFT_DTYPE_F32, kF64 = WEFT_DTYPE_F64, kI32 = WEFT_DTYPE_I32, kI64 = WEFT_DTYPE_I64,
                       kBool = WEFT_DTYPE_BOOL;

// The OpenCL kernel of each op (elementwise.cl).
const char* KernelOf(std::string_view op) {
  static const std::map<std::string_view, const char*> kernels = {
      {"Neg", "neg"},
      {"Abs", "abs_"},
      {"Sign", "sign_"},
      {"Exp", "exp_"},
      {"Expm1", "expm1_"},
      {"Log", "log_"},
      {"Log1p", "log1p_"},
      {"Sqrt", "sqrt_"},
      {"Rsqrt", "rsqrt_"},
      {"Square", "square"},
      {"Reciprocal", "reciprocal"},
      {"Sin", "sin_"},
      {"Cos", "cos_"},
      {"Tan", "tan_"},
      {"Asin", "asin_"},
      {"Acos", "acos_"},
      {"Atan", "atan_"},
      {"Sinh", "sinh_"},
      {"Cosh", "cosh_"},
      {"Tanh", "tanh_"},
      {"Asinh", "asinh_"},
      {"Acosh", "acosh_"},
      {"Atanh", "atanh_"},
      {"Sigmoid", "sigmoid"},
      {"Relu", "relu"},
      {"Relu6", "relu6"},
      {"Elu", "elu"},
      {"Selu", "selu"},
      {"Softplus", "softplus"},
      {"Erf", "erf_"},
      {"Floor", "floor_"},
      {"Ceil", "ceil_"},
      {"Round", "round_"},
      {"IsNan", "is_nan"},
      {"IsInf", "is_inf"},
      {"LogicalNot", "logical_not"},
      {"Add", "add"},
      {"Sub", "sub"},
      {"Mul", "mul"},
      {"Div", "div_"},
      {"RealDiv", "div_"},
      {"Maximum", "maximum"},
      {"Minimum", "minimum"},
      {"Pow", "pow_"},
      {"SquaredDifference", "squared_difference"},
      {"Equal", "equal"},
      {"NotEqual", "not_equal"},
      {"Less", "less"},
      {"LessEqual", "less_equal"},
      {"Greater", "greater"},
      {"GreaterEqual", "greater_equal"},
      {"LogicalAnd", "logical_and"},
      {"LogicalOr", "logical_or"},
      {"ReluGrad", "relu_grad"},
      {"Relu6Grad", "relu6_grad"},
      {"EluGrad", "elu_grad"},
      {"SeluGrad", "selu_grad"},
      {"SoftplusGrad", "softplus_grad"},
      {"SigmoidGrad", "sigmoid_grad"},
      {"TanhGrad", "tanh_grad"},
      {"SqrtGrad", "sqrt_grad"},
      {"RsqrtGrad", "rsqrt_grad"},
      {"ReciprocalGrad", "reciprocal_grad"},
  };
  auto it = kernels.find(op);
  if (it == kernels.end()) throw sdk::Error(WEFT_INTERNAL, Str("no OpenCL kernel is named for op ", op));
  return it->second;
}

// Launches |kernel| of |program| over the elements of |out|, reading each
// of |ins| through |plan|.
template <std::size_t N>
void LaunchBroadcast(Context& ctx, Program& program, const char* kernel, const std::array<const Tensor*, N>& ins,
                     const Tensor& out, const BroadcastPlan<N>& plan) {
  Launch launch(ctx, program, kernel);
  for (const Tensor* in : ins) launch.Buf(*in);
  launch.Buf(out).Val<cl_ulong>(out.num_elements).Plan(plan).Run(out.num_elements);
}

class UnaryKernel {
 public:
  explicit UnaryKernel(const InitContext& init)
      : program_(&ProgramFor(init.device(), "elementwise", init.input_dtype(0))),
        kernel_(std::string_view(init.op()) == "Gelu" ? (init.Bool("approximate") ? "gelu_tanh" : "gelu_erf")
                                                      : KernelOf(init.op())) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.allocate_output(0, x.dims);
    Launch(ctx, *program_, kernel_).Buf(x).Buf(y).Val<cl_ulong>(y.num_elements).Run(y.num_elements);
  }

 private:
  Program* program_;
  const char* kernel_;
};

// z = op(x, y) with broadcasting; the output dtype is the op's.
class BinaryKernel {
 public:
  explicit BinaryKernel(const InitContext& init)
      : program_(&ProgramFor(init.device(), "elementwise", init.input_dtype(0))), kernel_(KernelOf(init.op())) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), y = ctx.input(1);
    const Dims out_dims = BroadcastDims(x.dims, y.dims);
    const Tensor z = ctx.allocate_output(0, out_dims);
    if (z.num_elements == 0) return;
    LaunchBroadcast<2>(ctx, *program_, kernel_, {&x, &y}, z, PlanBroadcast2(out_dims, x.dims, y.dims));
  }

 private:
  Program* program_;
  const char* kernel_;
};

// An activation derivative: two inputs of one shape.
class GradKernel {
 public:
  explicit GradKernel(const InitContext& init)
      : program_(&ProgramFor(init.device(), "elementwise", init.input_dtype(0))),
        kernel_(std::string_view(init.op()) == "GeluGrad"
                    ? (init.Bool("approximate") ? "gelu_grad_tanh" : "gelu_grad_erf")
                    : KernelOf(init.op())) {
    const std::string_view op = init.op();
    const bool from_output =
        op == "SigmoidGrad" || op == "TanhGrad" || op == "SqrtGrad" || op == "RsqrtGrad" || op == "ReciprocalGrad";
    first_ = from_output ? "y" : "gradients";
    second_ = from_output ? "dy" : (op == "EluGrad" || op == "SeluGrad" ? "outputs" : "features");
  }
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    if (a.dims != b.dims) {
      Fail(first_, " has shape ", DimsString(a.dims), " but ", second_, " has shape ", DimsString(b.dims),
           "; they must have one shape");
    }
    const Tensor z = ctx.allocate_output(0, a.dims);
    if (z.num_elements == 0) return;
    LaunchBroadcast<2>(ctx, *program_, kernel_, {&a, &b}, z, PlanBroadcast2(a.dims, a.dims, b.dims));
  }

 private:
  Program* program_;
  const char* kernel_;
  const char* first_;
  const char* second_;
};

// Select (kernel where_) and ClipByValue (clip): three broadcast operands.
class TernaryKernel {
 public:
  explicit TernaryKernel(const InitContext& init)
      : select_(std::string_view(init.op()) == "Select"),
        program_(&ProgramFor(init.device(), "elementwise", init.input_dtype(select_ ? 1 : 0))) {}
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1), c = ctx.input(2);
    const Dims out_dims = BroadcastDims(BroadcastDims(a.dims, b.dims), c.dims);
    const Tensor z = ctx.allocate_output(0, out_dims);
    if (z.num_elements == 0) return;
    LaunchBroadcast<3>(ctx, *program_, select_ ? "where_" : "clip", {&a, &b, &c}, z,
                       PlanBroadcast3(out_dims, a.dims, b.dims, c.dims));
  }

 private:
  bool select_;
  Program* program_;
};

// Sums left to right, as the CPU kernel does: out = x0 + x1, out += x_i.
class AddNKernel {
 public:
  explicit AddNKernel(const InitContext& init)
      : program_(&ProgramFor(init.device(), "elementwise", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const std::vector<Tensor> inputs = sdk::AddNInputs(ctx);
    const int n = static_cast<int>(inputs.size());
    if (n == 1) {
      ctx.forward(0, 0);
      return;
    }
    const Tensor out = ctx.allocate_output(0, inputs[0].dims);
    if (out.num_elements == 0) return;
    const BroadcastPlan<2> plan = PlanBroadcast2(out.dims, out.dims, out.dims);
    for (int i = 1; i < n; ++i) {
      LaunchBroadcast<2>(ctx, *program_, "add", {i == 1 ? &inputs[0] : &out, &inputs[static_cast<std::size_t>(i)]}, out,
                         plan);
    }
  }

 private:
  Program* program_;
};

const char* ShortName(weft_dtype_t dtype) {
  switch (dtype) {
    case WEFT_DTYPE_F32: return "f32";
    case WEFT_DTYPE_F64: return "f64";
    case WEFT_DTYPE_I32: return "i32";
    case WEFT_DTYPE_I64: return "i64";
    case WEFT_DTYPE_BOOL: return "bool";
    default: throw sdk::Error(WEFT_INTERNAL, "Cast: no OpenCL kernel for this dtype");
  }
}

class CastKernel {
 public:
  explicit CastKernel(const InitContext& init)
      : kernel_(Str("cast_", ShortName(init.Type("SrcT")), "_to_", ShortName(init.Type("DstT")))) {
    RequireFp64(init.device(), init.Type("SrcT"));
    RequireFp64(init.device(), init.Type("DstT"));
    program_ = &init.device().GetProgram("cast", "");
  }
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.allocate_output(0, x.dims);
    Launch(ctx, *program_, kernel_.c_str()).Buf(x).Buf(y).Val<cl_ulong>(y.num_elements).Run(y.num_elements);
  }

 private:
  std::string kernel_;
  Program* program_ = nullptr;
};

class FillKernel {
 public:
  explicit FillKernel(const InitContext& init)
      : program_(&ProgramFor(init.device(), "elementwise", init.output_dtype(0))) {}
  void Compute(Context& ctx) {
    const Dims dims = ctx.ReadShape(ctx.input(0), "dims");
    const Tensor value = ctx.input(1);
    if (value.rank() != 0) Fail("value must be a scalar, got shape ", DimsString(value.dims));
    const Tensor y = ctx.allocate_output(0, dims);
    Launch(ctx, *program_, "fill").Buf(value).Buf(y).Val<cl_ulong>(y.num_elements).Run(y.num_elements);
  }

 private:
  Program* program_;
};

// ZerosLike and OnesLike: a fill of the element's bytes, no kernel.
class ConstantLikeKernel {
 public:
  explicit ConstantLikeKernel(const InitContext& init)
      : dtype_(init.output_dtype(0)), one_(std::string_view(init.op()) == "OnesLike") {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.allocate_output(0, x.dims);
    if (y.byte_size == 0) return;
    unsigned char pattern[8] = {};
    std::size_t size = weft_dtype_size(dtype_);
    if (one_) {
      const float f = 1;
      const double d = 1;
      const int32_t i = 1;
      const int64_t l = 1;
      switch (dtype_) {
        case WEFT_DTYPE_F32: std::memcpy(pattern, &f, 4); break;
        case WEFT_DTYPE_F64: std::memcpy(pattern, &d, 8); break;
        case WEFT_DTYPE_I32: std::memcpy(pattern, &i, 4); break;
        case WEFT_DTYPE_I64: std::memcpy(pattern, &l, 8); break;
        default: pattern[0] = 1; break;  // bool
      }
    }
    ctx.device().Check(
        clEnqueueFillBuffer(ctx.queue(), y.mem, pattern, size, y.offset, y.byte_size, 0, nullptr, nullptr),
        "clEnqueueFillBuffer");
  }

 private:
  weft_dtype_t dtype_;
  bool one_;
};

class BroadcastToKernel {
 public:
  explicit BroadcastToKernel(const InitContext& init)
      : program_(&ProgramFor(init.device(), "elementwise", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Dims target = ctx.ReadShape(ctx.input(1), "shape");
    sdk::CheckBroadcastTo(x.dims, target);
    if (target == x.dims) {
      ctx.forward(0, 0);
      return;
    }
    const Tensor y = ctx.allocate_output(0, target);
    if (y.num_elements == 0) return;
    LaunchBroadcast<1>(ctx, *program_, "broadcast", {&x}, y, PlanBroadcast1(target, x.dims));
  }

 private:
  Program* program_;
};

// The output walks the input with permuted strides: the broadcast kernel's
// strided read, with no dimension broadcast.
class TransposeKernel {
 public:
  explicit TransposeKernel(const InitContext& init)
      : perm_(init.Ints("perm")), program_(&ProgramFor(init.device(), "elementwise", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const int rank = x.rank();
    std::vector<int64_t> perm = perm_;
    if (perm.empty()) {
      for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
    }
    if (static_cast<int>(perm.size()) != rank) {
      Fail("perm ", DimsString(perm), " has ", perm.size(), " entries for a tensor of rank ", rank);
    }
    std::vector<int64_t> strides(static_cast<std::size_t>(rank), 1);
    for (int i = rank - 2; i >= 0; --i)
      strides[static_cast<std::size_t>(i)] = strides[static_cast<std::size_t>(i + 1)] * x.dim(i + 1);
    std::vector<bool> seen(perm.size(), false);
    BroadcastPlan<1> plan;
    plan.rank = std::max(rank, 1);
    for (int i = 0; i < 8; ++i) {
      plan.dims.s[i] = 1;
      plan.strides[0].s[i] = 0;
    }
    Dims out_dims;
    for (std::size_t i = 0; i < perm.size(); ++i) {
      const int64_t p = perm[i];
      if (p < -rank || p >= rank) {
        Fail("perm entry ", p, " is out of range for rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")");
      }
      const auto axis = static_cast<std::size_t>(p < 0 ? p + rank : p);
      if (seen[axis]) Fail("perm ", DimsString(perm), " repeats ", p);
      seen[axis] = true;
      out_dims.push_back(x.dims[axis]);
      plan.dims.s[i] = x.dims[axis];
      plan.strides[0].s[i] = strides[axis];
    }
    const Tensor y = ctx.allocate_output(0, out_dims);
    if (y.num_elements == 0) return;
    LaunchBroadcast<1>(ctx, *program_, "broadcast", {&x}, y, plan);
  }

 private:
  std::vector<int64_t> perm_;
  Program* program_;
};

template <class K>
void AddFor(KernelRegistry& r, const char* op, std::initializer_list<weft_dtype_t> dtypes) {
  for (weft_dtype_t t : dtypes) r.Add<K>(op, {{"T", t}});
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry& r) {
  for (const char* op : {"Neg", "Abs", "Sign", "Square", "Relu", "Relu6"})
    AddFor<UnaryKernel>(r, op, {kF32, kF64, kI32, kI64});
  for (const char* op :
       {"Exp",  "Expm1", "Log",      "Log1p", "Sqrt",  "Rsqrt", "Reciprocal", "Sin",   "Cos",   "Tan",
        "Asin", "Acos",  "Atan",     "Sinh",  "Cosh",  "Tanh",  "Asinh",      "Acosh", "Atanh", "Sigmoid",
        "Elu",  "Selu",  "Softplus", "Erf",   "Floor", "Ceil",  "Round",      "Gelu",  "IsNan", "IsInf"}) {
    AddFor<UnaryKernel>(r, op, {kF32, kF64});
  }
  r.Add<UnaryKernel>("LogicalNot", {});
  for (const char* op : {"Add", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference"}) {
    AddFor<BinaryKernel>(r, op, {kF32, kF64, kI32, kI64});
  }
  for (const char* op : {"Div", "RealDiv", "Pow"}) AddFor<BinaryKernel>(r, op, {kF32, kF64});
  for (const char* op : {"Equal", "NotEqual"}) AddFor<BinaryKernel>(r, op, {kF32, kF64, kI32, kI64, kBool});
  for (const char* op : {"Less", "LessEqual", "Greater", "GreaterEqual"})
    AddFor<BinaryKernel>(r, op, {kF32, kF64, kI32, kI64});
  r.Add<BinaryKernel>("LogicalAnd", {});
  r.Add<BinaryKernel>("LogicalOr", {});
  for (const char* op : {"ReluGrad", "Relu6Grad"}) AddFor<GradKernel>(r, op, {kF32, kF64, kI32, kI64});
  for (const char* op : {"EluGrad", "SeluGrad", "SoftplusGrad", "SigmoidGrad", "TanhGrad", "SqrtGrad", "RsqrtGrad",
                         "ReciprocalGrad", "GeluGrad"}) {
    AddFor<GradKernel>(r, op, {kF32, kF64});
  }
  AddFor<TernaryKernel>(r, "Select", {kF32, kF64, kI32, kI64, kBool});
  AddFor<TernaryKernel>(r, "ClipByValue", {kF32, kF64, kI32, kI64});
  AddFor<AddNKernel>(r, "AddN", {kF32, kF64, kI32, kI64});
  for (weft_dtype_t from : {kF32, kF64, kI32, kI64, kBool}) {
    for (weft_dtype_t to : {kF32, kF64, kI32, kI64, kBool}) r.Add<CastKernel>("Cast", {{"SrcT", from}, {"DstT", to}});
  }
  for (weft_dtype_t t : {kF32, kF64, kI32, kI64, kBool}) {
    for (weft_dtype_t index : {kI32, kI64}) r.Add<FillKernel>("Fill", {{"T", t}, {"index_type", index}}, 0, {"dims"});
    for (weft_dtype_t index : {kI32, kI64}) {
      r.Add<BroadcastToKernel>("BroadcastTo", {{"T", t}, {"Tidx", index}}, 0, {"shape"});
    }
    r.Add<ConstantLikeKernel>("ZerosLike", {{"T", t}});
    r.Add<TransposeKernel>("Transpose", {{"T", t}});
    r.Add<ConstantLikeKernel>("OnesLike", {{"T", t}});
  }
}

}  // namespace weft::opencl
