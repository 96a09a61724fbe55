// The hip plugin's kernel list: the shared families (gpu_common) and
// MatMul through the shared tiled kernel (this build has no rocBLAS).
#include "gpu_kernels.h"
#include "gpu_launch.h"

namespace weft::gpu {
namespace {

class MatMulKernel {
 public:
  explicit MatMulKernel(const InitContext& init)
      : ta_(init.Bool("transpose_a")), tb_(init.Bool("transpose_b")) {}

  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0);
    const Tensor b = ctx.input(1);
    if (a.rank() != 2 || b.rank() != 2) {
      Fail(ctx.node_name(), ": MatMul needs two matrices, got ", DimsString(a.dims), " and ",
           DimsString(b.dims));
    }
    const int64_t m = ta_ ? a.dim(1) : a.dim(0);
    const int64_t k = ta_ ? a.dim(0) : a.dim(1);
    const int64_t kb = tb_ ? b.dim(1) : b.dim(0);
    const int64_t n = tb_ ? b.dim(0) : b.dim(1);
    if (k != kb) {
      Fail(ctx.node_name(), ": inner dimensions differ: a ", DimsString(a.dims),
           ta_ ? " (transposed)" : "", " has ", k, ", b ", DimsString(b.dims),
           tb_ ? " (transposed)" : "", " has ", kb);
    }
    const Tensor c = ctx.allocate_output(0, {m, n});
    ctx.Check(launch::MatMul(a.f32(), b.f32(), c.f32(), m, k, n, ta_, tb_, ctx.stream()),
              "launching");
  }

 private:
  bool ta_;
  bool tb_;
};

}  // namespace

const KernelRegistry& Kernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    RegisterElementwiseKernels(r);
    RegisterReductionKernels(r);
    RegisterNnKernels(r);
    r.Add<MatMulKernel>("MatMul", {{"T", WEFT_DTYPE_F32}});
    return r;
  }();
  return registry;
}

}  // namespace weft::gpu
