// Reductions (reduction.cl): Sum, Mean, Max, Min, Prod, All, Any over axes,
// ArgMax and ArgMin along one axis, and the two reductions the gradients
// emit, SumToShape and BiasAddGrad.
//
// Dtypes: Sum, Max, Min, Prod, ArgMax, ArgMin, SumToShape and BiasAddGrad
// take f32, f64, i32 and i64; Mean takes f32 and f64; All and Any bool.
#include <algorithm>
#include <string_view>

#include "../kernel_framework.h"

namespace weft::opencl {
namespace {

constexpr weft_dtype_t kF32 = WEFT_DTYPE_F32, kF64 = WEFT_DTYPE_F64, kI32 = WEFT_DTYPE_I32, kI64 = WEFT_DTYPE_I64;

// Below this many outputs, and above this many elements per output, a sum
// is split into chunks summed in parallel, then added in order.
constexpr int64_t kFewOutputs = 512;
constexpr int64_t kLongSum = 8192;
constexpr int64_t kChunk = 4096;

// Bytes of the accumulator reduce_sum_parts writes (ACC in reduction.cl).
std::size_t AccBytes(const Device& device, weft_dtype_t dtype) {
  if (dtype == WEFT_DTYPE_F32 || dtype == WEFT_DTYPE_F64) return device.has_fp64() ? 8 : 4;
  return weft_dtype_size(dtype);
}

template <class L>
L& PlanArgs(L& launch, const ReducePlan& plan) {
  return launch.template Val<cl_ulong>(plan.num_out)
      .Val(plan.kept_rank)
      .Val(plan.kept_dims)
      .Val(plan.kept_strides)
      .Val(plan.red_rank)
      .Val(plan.red_dims)
      .Val(plan.red_strides)
      .template Val<cl_ulong>(plan.num_reduced);
}

// y = the sum (or mean) of x by |plan|.
void Sum(Context& ctx, Program& program, const Tensor& x, const Tensor& y, const ReducePlan& plan, bool mean) {
  if (plan.num_out == 0) return;
  if (plan.num_out >= kFewOutputs || plan.num_reduced < kLongSum) {
    Launch launch(ctx, program, "reduce_sum");
    launch.Buf(x).Buf(y);
    PlanArgs(launch, plan).Val<cl_int>(mean ? 1 : 0).Run(plan.num_out);
    return;
  }
  const int64_t parts = std::min<int64_t>(256, (plan.num_reduced + kChunk - 1) / kChunk);
  const int64_t chunk = (plan.num_reduced + parts - 1) / parts;
  const Tensor partial =
      ctx.allocate_temp(WEFT_DTYPE_U8, {plan.num_out * parts * static_cast<int64_t>(AccBytes(ctx.device(), x.dtype))});
  {
    Launch launch(ctx, program, "reduce_sum_parts");
    launch.Buf(x).Buf(partial);
    PlanArgs(launch, plan).Val<cl_ulong>(parts).Val<cl_ulong>(chunk).Run(plan.num_out * parts);
  }
  Launch(ctx, program, "reduce_sum_total")
      .Buf(partial)
      .Buf(y)
      .Val<cl_ulong>(plan.num_out)
      .Val<cl_ulong>(parts)
      .Val<cl_ulong>(plan.num_reduced)
      .Val<cl_int>(mean ? 1 : 0)
      .Run(plan.num_out);
}

class ReduceKernel {
 public:
  explicit ReduceKernel(const InitContext& init)
      : op_(init.op()),
        axis_(init.Ints("axis")),
        keep_dims_(init.Bool("keep_dims")),
        program_(&ProgramFor(init.device(), "reduction", init.input_dtype(0))) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const int rank = x.rank();
    std::vector<bool> reduce(x.dims.size(), axis_.empty());
    for (const int64_t a : axis_) {
      if (a < -rank || a >= rank) {
        Fail("axis ", a, " is out of range for rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")");
      }
      const auto i = static_cast<std::size_t>(a < 0 ? a + rank : a);
      if (reduce[i]) Fail("axis ", a, " is repeated in ", DimsString(axis_));
      reduce[i] = true;
    }
    Dims out_dims;
    for (int i = 0; i < rank; ++i) {
      if (!reduce[static_cast<std::size_t>(i)]) {
        out_dims.push_back(x.dim(i));
      } else if (keep_dims_) {
        out_dims.push_back(1);
      }
    }
    const ReducePlan plan = PlanReduce(x.dims, reduce);
    const bool extremum = op_ == "Max" || op_ == "Min";
    if (plan.num_reduced == 0 && extremum) {
      Fail(op_, " of an empty set has no identity: input shape ", DimsString(x.dims), ", axis ", DimsString(axis_));
    }
    const Tensor y = ctx.allocate_output(0, out_dims);
    if (plan.num_out == 0) return;
    if (op_ == "Sum" || op_ == "Mean") {
      Sum(ctx, *program_, x, y, plan, op_ == "Mean");
      return;
    }
    const char* kernel = extremum        ? "reduce_extremum"
                         : op_ == "Prod" ? "reduce_prod"
                         : op_ == "All"  ? "reduce_all"
                                         : "reduce_any";
    Launch launch(ctx, *program_, kernel);
    launch.Buf(x).Buf(y);
    PlanArgs(launch, plan);
    if (extremum) launch.Val<cl_int>(op_ == "Max" ? 1 : 0);
    launch.Run(plan.num_out);
  }

 private:
  std::string op_;
  std::vector<int64_t> axis_;
  bool keep_dims_;
  Program* program_;
};

class ArgReduceKernel {
 public:
  explicit ArgReduceKernel(const InitContext& init)
      : max_(std::string_view(init.op()) == "ArgMax"),
        axis_(init.Int("axis")),
        wide_(init.output_dtype(0) == WEFT_DTYPE_I64),
        program_(&ProgramFor(init.device(), "reduction", init.input_dtype(0))) {}

  void Compute(Context& ctx) {
    const char* name = max_ ? "ArgMax" : "ArgMin";
    const Tensor x = ctx.input(0);
    const int rank = x.rank();
    if (rank == 0) Fail(name, " needs a tensor of rank >= 1, got a scalar");
    if (axis_ < -rank || axis_ >= rank) {
      Fail("axis ", axis_, " is out of range for rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")");
    }
    const int axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    int64_t inner = 1;
    Dims out_dims;
    for (int i = 0; i < rank; ++i) {
      if (i == axis) continue;
      if (i > axis) inner *= x.dim(i);
      out_dims.push_back(x.dim(i));
    }
    const int64_t n = x.dim(axis);
    if (n == 0) Fail(name, " of an empty axis: input shape ", DimsString(x.dims), ", axis ", axis_);
    if (!wide_ && n - 1 > INT32_MAX) {
      Fail(name, ": axis ", axis_, " of ", DimsString(x.dims), " has more indices than output_type holds");
    }
    const Tensor y = ctx.allocate_output(0, out_dims);
    Launch(ctx, *program_, wide_ ? "arg_reduce_i64" : "arg_reduce_i32")
        .Buf(x)
        .Buf(y)
        .Val<cl_ulong>(y.num_elements)
        .Val<cl_ulong>(n)
        .Val<cl_ulong>(inner)
        .Val<cl_int>(max_ ? 1 : 0)
        .Run(y.num_elements);
  }

 private:
  bool max_;
  int64_t axis_;
  bool wide_;
  Program* program_;
};

class SumToShapeKernel {
 public:
  explicit SumToShapeKernel(const InitContext& init)
      : program_(&ProgramFor(init.device(), "reduction", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Dims target = ctx.ReadShape(ctx.input(1), "shape");
    if (target.size() > x.dims.size()) {
      Fail("input of shape ", DimsString(x.dims), " is not a broadcast of ", DimsString(target),
           ", which has more dimensions");
    }
    const std::size_t lead = x.dims.size() - target.size();
    std::vector<bool> reduce(x.dims.size(), true);
    for (std::size_t i = 0; i < target.size(); ++i) {
      const int64_t t = target[i], d = x.dims[lead + i];
      if (t != 1 && d != t) {
        Fail("input of shape ", DimsString(x.dims), " is not a broadcast of ", DimsString(target), ": dimension ",
             lead + i, " is ", d, ", not ", t);
      }
      reduce[lead + i] = t == 1 && d != 1;
    }
    if (target == x.dims) {
      ctx.forward(0, 0);
      return;
    }
    const Tensor y = ctx.allocate_output(0, target);
    Sum(ctx, *program_, x, y, PlanReduce(x.dims, reduce), false);
  }

 private:
  Program* program_;
};

class BiasAddGradKernel {
 public:
  explicit BiasAddGradKernel(const InitContext& init)
      : nchw_(init.String("data_format") == "NCHW"),
        program_(&ProgramFor(init.device(), "reduction", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor dy = ctx.input(0);
    if (dy.rank() < 2) Fail("out_backprop must have rank >= 2, got ", DimsString(dy.dims));
    const int axis = nchw_ ? 1 : dy.rank() - 1;
    std::vector<bool> reduce(dy.dims.size(), true);
    reduce[static_cast<std::size_t>(axis)] = false;
    const Tensor y = ctx.allocate_output(0, {dy.dim(axis)});
    Sum(ctx, *program_, dy, y, PlanReduce(dy.dims, reduce), false);
  }

 private:
  bool nchw_;
  Program* program_;
};

}  // namespace

void RegisterReductionKernels(KernelRegistry& r) {
  for (weft_dtype_t t : {kF32, kF64, kI32, kI64}) {
    for (const char* op : {"Sum", "Max", "Min", "Prod"}) r.Add<ReduceKernel>(op, {{"T", t}});
    for (const char* op : {"ArgMax", "ArgMin"}) {
      r.Add<ArgReduceKernel>(op, {{"T", t}, {"output_type", kI32}});
      r.Add<ArgReduceKernel>(op, {{"T", t}, {"output_type", kI64}});
    }
    r.Add<SumToShapeKernel>("SumToShape", {{"T", t}, {"Tidx", kI32}}, 0, {"shape"});
    r.Add<SumToShapeKernel>("SumToShape", {{"T", t}, {"Tidx", kI64}}, 0, {"shape"});
    r.Add<BiasAddGradKernel>("BiasAddGrad", {{"T", t}});
  }
  for (weft_dtype_t t : {kF32, kF64}) r.Add<ReduceKernel>("Mean", {{"T", t}});
  r.Add<ReduceKernel>("All", {});
  r.Add<ReduceKernel>("Any", {});
}

}  // namespace weft::opencl
