// Matrix products by loop nests: MatMul's path for f64 and the integer
// types (matmul.cc), and for what the lite build's XNNPACK does not take
// (xnn_kernels.cc).
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_LOOP_GEMM_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_LOOP_GEMM_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../kernel_framework.h"

namespace weft::cpu {

// C = op(A) x op(B) for row-major A [m,k] (or [k,m] when transposed), B
// [k,n] (or [n,k]). The loop order keeps the innermost loop contiguous in B
// and C so the compiler vectorises it.
template <class T>
void LoopGemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  for (int64_t i = 0; i < m * n; ++i) c[i] = T(0);
  ParallelFor(m, n * k, [&](int64_t row_begin, int64_t row_end) {
    constexpr int64_t kBlock = 256;
    for (int64_t k0 = 0; k0 < k; k0 += kBlock) {
      const int64_t k1 = std::min(k, k0 + kBlock);
      for (int64_t i = row_begin; i < row_end; ++i) {
        T* crow = c + i * n;
        for (int64_t p = k0; p < k1; ++p) {
          const T av = ta ? a[p * m + i] : a[i * k + p];
          if (!tb) {
            const T* brow = b + p * n;
            for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
          } else {
            for (int64_t j = 0; j < n; ++j) crow[j] += av * b[j * k + p];
          }
        }
      }
    }
  });
}

// Integer products wrap: accumulate in the unsigned type of the same width.
template <class T>
void LoopIntGemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  using U = std::make_unsigned_t<T>;
  std::vector<U> acc(static_cast<std::size_t>(m * n), 0);
  ParallelFor(m, n * k, [&](int64_t row_begin, int64_t row_end) {
    for (int64_t i = row_begin; i < row_end; ++i) {
      U* crow = acc.data() + i * n;
      for (int64_t p = 0; p < k; ++p) {
        const U av = static_cast<U>(ta ? a[p * m + i] : a[i * k + p]);
        for (int64_t j = 0; j < n; ++j) crow[j] += av * static_cast<U>(tb ? b[j * k + p] : b[p * n + j]);
      }
    }
  });
  for (int64_t i = 0; i < m * n; ++i) c[i] = static_cast<T>(acc[static_cast<std::size_t>(i)]);
}

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_LOOP_GEMM_H_
