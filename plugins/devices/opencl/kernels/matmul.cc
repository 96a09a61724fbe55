// MatMul and BatchMatMul (matmul.cl): a tiled kernel with 64x64 tiles of
// the product in local memory per work-group, or, on devices whose local
// memory is ordinary memory, a register-blocked kernel without barriers
// (devices.opencl.matmul_kernel chooses; see matmul.cl). Dtypes: f32, f64,
// i32 and i64 (integer products wrap).
#include "matmul.h"

namespace weft::opencl {
namespace {

constexpr int64_t kTile = 64;  // TS in matmul.cl
constexpr size_t kGroup = 16;  // WG in matmul.cl

}  // namespace

void Multiply(Context& ctx, Program& program, const Tensor& a, const Tensor& b, const Tensor& c, int64_t m, int64_t n,
              int64_t k, bool ta, bool tb, const BroadcastPlan<2>& batch, int64_t batches) {
  if (c.num_elements == 0) return;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
    Fail("matrices of ", m, "x", k, " and ", k, "x", n, " are too large for the OpenCL kernel (2^31 - 1 per side)");
  }
  if (!ctx.device().blocked_matmul()) {
    const uint64_t global[3] = {static_cast<uint64_t>((n + kTile - 1) / kTile) * kGroup,
                                static_cast<uint64_t>((m + kTile - 1) / kTile) * kGroup,
                                static_cast<uint64_t>(batches)};
    const size_t local[3] = {kGroup, kGroup, 1};
    Launch(ctx, program, "matmul")
        .Buf(a)
        .Buf(b)
        .Buf(c)
        .Val(static_cast<cl_int>(m))
        .Val(static_cast<cl_int>(n))
        .Val(static_cast<cl_int>(k))
        .Val<cl_int>(ta ? 1 : 0)
        .Val<cl_int>(tb ? 1 : 0)
        .Plan(batch)
        .RunN(3, global, local);
    return;
  }
  // The blocked kernel reads rows of B: a transposed B is transposed back
  // first (K*N copies against M*N*K products).
  Tensor rows = b;
  if (tb && b.num_elements > 0) {
    rows = ctx.allocate_temp(b.dtype, b.dims);
    Launch(ctx, program, "transpose")
        .Buf(b)
        .Buf(rows)
        .Val<cl_ulong>(n)
        .Val<cl_ulong>(k)
        .Val<cl_ulong>(b.num_elements)
        .Run(b.num_elements);
  }
  const uint64_t global[3] = {static_cast<uint64_t>((n + 7) / 8), static_cast<uint64_t>((m + 3) / 4),
                              static_cast<uint64_t>(batches)};
  const size_t local[3] = {8, 8, 1};
  Launch(ctx, program, "matmul_blocked")
      .Buf(a)
      .Buf(rows)
      .Buf(c)
      .Val(static_cast<cl_int>(m))
      .Val(static_cast<cl_int>(n))
      .Val(static_cast<cl_int>(k))
      .Val<cl_int>(ta ? 1 : 0)
      .Plan(batch)
      .RunN(3, global, local);
}

namespace {

class MatMulKernel {
 public:
  explicit MatMulKernel(const InitContext& init)
      : ta_(init.Bool("transpose_a")),
        tb_(init.Bool("transpose_b")),
        program_(&ProgramFor(init.device(), "matmul", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    const sdk::MatMulShape s = sdk::CheckMatMul(a, b, ta_, tb_);
    const Tensor c = ctx.allocate_output(0, {s.m, s.n});
    Multiply(ctx, *program_, a, b, c, s.m, s.n, s.k, ta_, tb_, PlanBroadcast2({1}, {1}, {1}), 1);
  }

 private:
  bool ta_, tb_;
  Program* program_;
};

class BatchMatMulKernel {
 public:
  explicit BatchMatMulKernel(const InitContext& init)
      : ax_(init.Bool("adj_x")),
        ay_(init.Bool("adj_y")),
        program_(&ProgramFor(init.device(), "matmul", init.input_dtype(0))) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), y = ctx.input(1);
    const sdk::BatchMatMulShape s = sdk::CheckBatchMatMul(x, y, ax_, ay_);
    const auto or_one = [](const Dims& d) { return d.empty() ? Dims{1} : d; };
    BroadcastPlan<2> plan = PlanBroadcast2(or_one(s.batch), or_one(s.x_batch), or_one(s.y_batch));
    // Strides between matrices, in elements.
    for (int i = 0; i < 8; ++i) {
      plan.strides[0].s[i] *= s.m * s.k;
      plan.strides[1].s[i] *= s.k * s.n;
    }
    const Tensor c = ctx.allocate_output(0, s.OutputDims());
    Multiply(ctx, *program_, x, y, c, s.m, s.n, s.k, ax_, ay_, plan, s.count);
  }

 private:
  bool ax_, ay_;
  Program* program_;
};

}  // namespace

void RegisterMatMulKernels(KernelRegistry& r) {
  for (weft_dtype_t t : {WEFT_DTYPE_F32, WEFT_DTYPE_F64, WEFT_DTYPE_I32, WEFT_DTYPE_I64}) {
    r.Add<MatMulKernel>("MatMul", {{"T", t}});
    r.Add<BatchMatMulKernel>("BatchMatMul", {{"T", t}});
  }
}

}  // namespace weft::opencl
