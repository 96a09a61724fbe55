// Matrix products for kernels other than MatMul (the fused LSTM cell): the
// same path MatMul takes (oneDNN for f32, with primitives cached per shape;
// the blocked loop nest for f64), behind a cache each kernel owns.
//
//   GemmCache cache_;                       // a kernel member, one per product
//   Gemm<float>(cache_, a, b, c, m, n, k, /*ta=*/false, /*tb=*/true);
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_GEMM_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_GEMM_H_

#include <cstdint>
#include <memory>

#include "../kernel_framework.h"
#include "weft/sdk/op_checks.h"

namespace weft::cpu {

// The oneDNN primitives of one product site, by (m, n, k). The transposes
// and dtype of a site must not change between calls. Thread-safe.
class GemmCache {
 public:
  GemmCache();
  ~GemmCache();
  GemmCache(const GemmCache&) = delete;
  GemmCache& operator=(const GemmCache&) = delete;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// The sizes of op(a) [m, k] x op(b) [k, n] for rank-2 |a| and |b| (each
// transposed first when |ta|, |tb|); fails naming both shapes when the
// inner dimensions differ. MatMul and the fused _FusedMatMul share it.
using sdk::MatMulDims;

// c [m, n] = op(a) x op(b), all row-major: a is [m, k] ([k, m] when |ta|),
// b is [k, n] ([n, k] when |tb|). c is overwritten (zeros when k is 0).
// Defined for float and double.
template <class T>
void Gemm(GemmCache& cache, const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb);

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_GEMM_H_
