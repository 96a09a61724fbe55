// Kernels of the row-routing ops (core/ops/sparse_ops.cc): Unique,
// DynamicPartition and DynamicStitch. They move whole rows with memcpy and
// work for every fixed-size dtype (Unique for every numeric one). The checks
// of the shape functions are repeated here, with the same messages, for
// shapes and values only known at run time.
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "../kernel_framework.h"
#include "kernel_util.h"

namespace weft::cpu {
namespace {

// "[1,2]": the row-major index of flat position |i| in |dims|.
std::string Position(int64_t i, const Dims& dims) {
  Dims index(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    index[d] = dims[d] == 0 ? 0 : i % dims[d];
    if (dims[d] != 0) i /= dims[d];
  }
  return DimsString(index);
}

// Whether |prefix| is the beginning of |dims|.
bool IsPrefix(const Dims& prefix, const Dims& dims) {
  return prefix.size() <= dims.size() && std::equal(prefix.begin(), prefix.end(), dims.begin());
}

// --- Unique -----------------------------------------------------------------------------

// The key a value is compared by: floats by value, with -0 folded into +0;
// a NaN gets no key (each NaN is distinct).
template <class T>
bool KeyOf(T v, std::conditional_t<kIsFloat<T>, double, int64_t>* key) {
  if constexpr (kIsFloat<T>) {
    double d = 0;
    if constexpr (std::is_same_v<T, Half>) {
      d = sdk::HalfToFloat(v.bits);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      d = sdk::Bfloat16ToFloat(v.bits);
    } else {
      d = static_cast<double>(v);
    }
    if (std::isnan(d)) return false;
    *key = d == 0 ? 0.0 : d;
    return true;
  } else {
    *key = static_cast<int64_t>(v);
    return true;
  }
}

template <class T, class Index>
class UniqueKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    if (x.rank() != 1) Fail("x must be 1-D, got shape ", DimsString(x.dims));
    const int64_t n = x.num_elements;
    const T* px = x.as<T>();
    using Key = std::conditional_t<kIsFloat<T>, double, int64_t>;
    std::unordered_map<Key, int64_t> seen;
    seen.reserve(ToSize(n));
    std::vector<int64_t> first;  // position in x of each distinct value
    Tensor idx = ctx.allocate_output(1, x.dims);
    Index* pidx = idx.as<Index>();
    for (int64_t i = 0; i < n; ++i) {
      Key key{};
      int64_t slot = static_cast<int64_t>(first.size());
      if (KeyOf(px[i], &key)) {
        auto [it, inserted] = seen.emplace(key, slot);
        if (!inserted) slot = it->second;
      }
      if (slot == static_cast<int64_t>(first.size())) first.push_back(i);
      if constexpr (sizeof(Index) < sizeof(int64_t)) {
        if (slot > static_cast<int64_t>(std::numeric_limits<Index>::max())) {
          Fail("x has more distinct values than out_idx (i32) can count; use out_idx = i64");
        }
      }
      pidx[i] = static_cast<Index>(slot);
    }
    Tensor y = ctx.allocate_output(0, Dims{static_cast<int64_t>(first.size())});
    T* py = y.as<T>();
    for (std::size_t k = 0; k < first.size(); ++k) py[k] = px[first[k]];
  }
};

// --- DynamicPartition ---------------------------------------------------------------------

class DynamicPartitionKernel {
 public:
  explicit DynamicPartitionKernel(const InitContext& init) : n_(init.Int("num_partitions")) {}
  void Compute(Context& ctx) {
    const Tensor data = ctx.input(0), partitions = ctx.input(1);
    if (!IsPrefix(partitions.dims, data.dims)) {
      Fail("partitions' shape ", DimsString(partitions.dims), " is not a prefix of data's shape ",
           DimsString(data.dims));
    }
    const int32_t* pp = partitions.as<int32_t>();
    const int64_t rows = partitions.num_elements;
    std::vector<int64_t> counts(ToSize(n_), 0);
    for (int64_t i = 0; i < rows; ++i) {
      if (pp[i] < 0 || pp[i] >= n_) {
        Fail("partitions", Position(i, partitions.dims), " = ", pp[i], " is outside [0, ", n_, ") (num_partitions is ",
             n_, ")");
      }
      ++counts[ToSize(pp[i])];
    }
    const Dims inner(data.dims.begin() + partitions.rank(), data.dims.end());
    const std::size_t row_bytes =
        ToSize(Product(inner, 0, static_cast<int64_t>(inner.size()))) * ElementSize(data.dtype);
    std::vector<char*> out(ToSize(n_));
    for (int64_t p = 0; p < n_; ++p) {
      Dims dims{counts[ToSize(p)]};
      dims.insert(dims.end(), inner.begin(), inner.end());
      out[ToSize(p)] = static_cast<char*>(ctx.allocate_output(static_cast<int>(p), dims).data);
    }
    if (row_bytes == 0) return;
    const auto* src = static_cast<const char*>(data.data);
    std::vector<std::size_t> at(ToSize(n_), 0);
    for (int64_t i = 0; i < rows; ++i) {
      const auto p = ToSize(pp[i]);
      std::memcpy(out[p] + at[p] * row_bytes, src + ToSize(i) * row_bytes, row_bytes);
      ++at[p];
    }
  }

 private:
  const int64_t n_;
};

// --- DynamicStitch --------------------------------------------------------------------

class DynamicStitchKernel {
 public:
  void Compute(Context& ctx) {
    const int n = ctx.num_inputs() / 2;
    std::vector<Tensor> indices, data;
    for (int m = 0; m < n; ++m) {
      indices.push_back(ctx.input(m));
      data.push_back(ctx.input(n + m));
    }
    Dims inner;
    bool have_inner = false;
    int64_t rows = 0;
    for (int m = 0; m < n; ++m) {
      const Tensor& ind = indices[ToSize(m)];
      const Tensor& d = data[ToSize(m)];
      if (!IsPrefix(ind.dims, d.dims)) {
        Fail("indices[", m, "]'s shape ", DimsString(ind.dims), " is not a prefix of data[", m, "]'s shape ",
             DimsString(d.dims));
      }
      const Dims rest(d.dims.begin() + ind.rank(), d.dims.end());
      if (have_inner && rest != inner) {
        Fail("data[", m, "] has rows of shape ", DimsString(rest), ", but the data before it has rows of shape ",
             DimsString(inner));
      }
      inner = rest;
      have_inner = true;
      const int32_t* pi = ind.as<int32_t>();
      for (int64_t i = 0; i < ind.num_elements; ++i) {
        if (pi[i] < 0) Fail("indices[", m, "]", Position(i, ind.dims), " = ", pi[i], " is negative");
        rows = std::max<int64_t>(rows, static_cast<int64_t>(pi[i]) + 1);
      }
    }
    Dims out_dims{rows};
    out_dims.insert(out_dims.end(), inner.begin(), inner.end());
    Tensor out = ctx.allocate_output(0, out_dims);
    const std::size_t row_bytes =
        ToSize(Product(inner, 0, static_cast<int64_t>(inner.size()))) * ElementSize(out.dtype);
    std::vector<char> named(ToSize(rows), 0);
    auto* dst = static_cast<char*>(out.data);
    for (int m = 0; m < n; ++m) {
      const int32_t* pi = indices[ToSize(m)].as<int32_t>();
      const auto* src = static_cast<const char*>(data[ToSize(m)].data);
      for (int64_t i = 0; i < indices[ToSize(m)].num_elements; ++i) {
        named[ToSize(pi[i])] = 1;
        if (row_bytes != 0) std::memcpy(dst + ToSize(pi[i]) * row_bytes, src + ToSize(i) * row_bytes, row_bytes);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      if (!named[ToSize(r)])
        Fail("index ", r, " is below the largest index, ", rows - 1, ", but no indices list names it");
    }
  }
};

}  // namespace

void RegisterSparseKernels(KernelRegistry& r) {
  ForEachNumericType([&r]<class T>() {
    constexpr weft_dtype_t t = DtypeOf<T>();
    AddKernel<"Unique", UniqueKernel<T, int32_t>, t>(r, {{"T", t}, {"out_idx", WEFT_DTYPE_I32}});
    AddKernel<"Unique", UniqueKernel<T, int64_t>, t>(r, {{"T", t}, {"out_idx", WEFT_DTYPE_I64}});
  });
  for (weft_dtype_t t : kFixedSizeTypes) {
    AddKernel<"DynamicPartition", DynamicPartitionKernel>(r, {{"T", t}});
    AddKernel<"DynamicStitch", DynamicStitchKernel>(r, {{"T", t}});
  }
}

}  // namespace weft::cpu
