// MatMul and BatchMatMul. f32 and bf16 go to oneDNN's matmul (bf16
// accumulates in f32), with primitives cached per shape in the kernel;
// f16 converts to f32 and back; f64 and the integer types use a blocked
// loop nest (oneDNN has no f64 matmul on CPU).
#include <oneapi/dnnl/dnnl.hpp>

#include "broadcast.h"
#include "dnnl_util.h"
#include "gemm.h"
#include "loop_gemm.h"

namespace weft::cpu {
namespace {

// A oneDNN matmul for one (m, n, k, transposes, dtype), created once.
class DnnlMatMul {
 public:
  DnnlMatMul(int64_t m, int64_t n, int64_t k, bool ta, bool tb, dnnl::memory::data_type dt) {
    using tag = dnnl::memory::format_tag;
    a_md_ = dnnl::memory::desc({m, k}, dt, ta ? tag::ba : tag::ab);
    b_md_ = dnnl::memory::desc({k, n}, dt, tb ? tag::ba : tag::ab);
    c_md_ = dnnl::memory::desc({m, n}, dt, tag::ab);
    auto desc = dnnl::matmul::desc(a_md_, b_md_, c_md_);
    primitive_ = dnnl::matmul(dnnl::matmul::primitive_desc(desc, WithUserScratchpad(), Engine()));
  }
  void Run(const void* a, const void* b, void* c) const {
    UseIntraOpThreads();
    Execute(primitive_, {{DNNL_ARG_SRC, dnnl::memory(a_md_, Engine(), const_cast<void*>(a))},
                         {DNNL_ARG_WEIGHTS, dnnl::memory(b_md_, Engine(), const_cast<void*>(b))},
                         {DNNL_ARG_DST, dnnl::memory(c_md_, Engine(), c)}});
  }

 private:
  dnnl::memory::desc a_md_, b_md_, c_md_;
  dnnl::matmul primitive_;
};

// A node's matmuls by (m, n, k); its transposes and dtype are fixed.
using MatMulCache = PrimitiveCache<DnnlMatMul>;

// One matrix product, for any dtype.
template <class T>
void MatMulOne(MatMulCache& cache, const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i) c[i] = StoreAs<T>(0);
    return;
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
    const auto dt = std::is_same_v<T, float> ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::bf16;
    if (const DnnlMatMul* prim = cache.Get(Dims{m, n, k}, m, n, k, ta, tb, dt)) {
      prim->Run(a, b, c);
      return;
    }
  }
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    // Through f32: exact products, f32 accumulation, one rounding at the end.
    std::vector<float> fa(static_cast<std::size_t>(m * k)), fb(static_cast<std::size_t>(k * n));
    std::vector<float> fc(static_cast<std::size_t>(m * n));
    for (std::size_t i = 0; i < fa.size(); ++i) fa[i] = Load(a[i]);
    for (std::size_t i = 0; i < fb.size(); ++i) fb[i] = Load(b[i]);
    MatMulOne<float>(cache, fa.data(), fb.data(), fc.data(), m, n, k, ta, tb);
    for (std::size_t i = 0; i < fc.size(); ++i) c[i] = StoreAs<T>(fc[i]);
  } else if constexpr (std::is_integral_v<T>) {
    LoopIntGemm<T>(a, b, c, m, n, k, ta, tb);
  } else {
    LoopGemm<T>(a, b, c, m, n, k, ta, tb);
  }
}

template <class T>
class MatMulKernel {
 public:
  explicit MatMulKernel(const InitContext& init) : ta_(init.Bool("transpose_a")), tb_(init.Bool("transpose_b")) {}
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    const auto [m, k, n] = sdk::CheckMatMul(a, b, ta_, tb_);
    Tensor c = ctx.allocate_output(0, {m, n});
    MatMulOne<T>(cache_, a.as<T>(), b.as<T>(), c.as<T>(), m, n, k, ta_, tb_);
  }

 private:
  bool ta_, tb_;
  MatMulCache cache_;
};

template <class T>
class BatchMatMulKernel {
 public:
  explicit BatchMatMulKernel(const InitContext& init) : ax_(init.Bool("adj_x")), ay_(init.Bool("adj_y")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), y = ctx.input(1);
    const sdk::BatchMatMulShape s = sdk::CheckBatchMatMul(x, y, ax_, ay_);
    Tensor out = ctx.allocate_output(0, s.OutputDims());
    if (s.count == 0 || s.m == 0 || s.n == 0) return;
    const int64_t m = s.m, n = s.n, k = s.k;
    s.ForEachMatrix([&](int64_t i, int64_t xi, int64_t yi) {
      MatMulOne<T>(cache_, x.as<T>() + xi * m * k, y.as<T>() + yi * k * n, out.as<T>() + i * m * n, m, n, k, ax_, ay_);
    });
  }

 private:
  bool ax_, ay_;
  MatMulCache cache_;
};

}  // namespace

// --- Gemm (gemm.h): MatMul's path for the other kernels ---------------------------

struct GemmCache::Impl {
  MatMulCache cache;
};

GemmCache::GemmCache() : impl_(std::make_unique<Impl>()) {}
GemmCache::~GemmCache() = default;

template <class T>
void Gemm(GemmCache& cache, const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  MatMulOne<T>(cache.impl().cache, a, b, c, m, n, k, ta, tb);
}
template void Gemm<float>(GemmCache&, const float*, const float*, float*, int64_t, int64_t, int64_t, bool, bool);
template void Gemm<double>(GemmCache&, const double*, const double*, double*, int64_t, int64_t, int64_t, bool, bool);

void RegisterMatMulKernels(KernelRegistry& r) {
  auto add = [&r]<class T>() {
    r.Add<MatMulKernel<T>>("MatMul", {{"T", DtypeOf<T>()}});
    r.Add<BatchMatMulKernel<T>>("BatchMatMul", {{"T", DtypeOf<T>()}});
  };
  add.template operator()<float>();
  add.template operator()<double>();
  add.template operator()<Half>();
  add.template operator()<BFloat16>();
  add.template operator()<int32_t>();
  add.template operator()<int64_t>();
}

}  // namespace weft::cpu
