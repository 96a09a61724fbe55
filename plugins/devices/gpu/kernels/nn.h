// Neural-network kernels for the cuda and hip plugins (core/ops/nn_ops.cc):
// BiasAdd, the two softmax cross-entropies, and Softmax/LogSoftmax as
// direct kernels (the hip plugin's; the cuda plugin runs cuDNN's softmax,
// cuda/dnn.cc).
//
// The row kernels give each row (a softmax over one axis) a block: the
// threads stride over the row's elements and combine their maxima and
// sums in a tree in shared memory.
//
// Device code: included by plugins/devices/cuda/nn.cu and
// plugins/devices/hip/nn.hip.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_NN_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_NN_H_

#include <algorithm>
#include <type_traits>

#include "gpu/device_compat.h"
#include "gpu/kernels/softmax.h"

namespace weft::gpu {

// The direct Softmax and LogSoftmax (for plugins without a library
// softmax).
void RegisterSoftmaxKernels(KernelRegistry& r);

namespace {

// --- BiasAdd -----------------------------------------------------------------------

template <class T>
__global__ void BiasAddLoop(const T* x, const T* bias, T* y, int64_t n, int64_t channels, int64_t inner) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const T b = bias[(i / inner) % channels];
    if constexpr (std::is_integral_v<T>) {
      y[i] = WrapAdd(x[i], b);
    } else {
      y[i] = x[i] + b;
    }
  }
}

template <class T>
class BiasAddKernel {
 public:
  explicit BiasAddKernel(const InitContext& init) : nchw_(sdk::IsNchw(init)) {}
  void Compute(Context& ctx) {
    const Tensor value = ctx.input(0), bias = ctx.input(1);
    const sdk::ChannelLayout c = sdk::CheckBiasAdd(value, bias, nchw_);
    const Tensor y = ctx.allocate_output(0, value.dims);
    if (y.num_elements == 0) return;
    BiasAddLoop<T><<<GridFor(y.num_elements), kBlock, 0, ctx.stream()>>>(
        value.as<const T>(), bias.as<const T>(), y.as<T>(), y.num_elements, c.channels, c.inner);
    CheckLaunch("BiasAdd");
  }

 private:
  bool nchw_;
};

// Row |row| of a softmax over an axis of length |n| with |inner| elements
// after it: element k is at base + k * inner.
__device__ inline int64_t RowBase(int64_t row, int64_t n, int64_t inner) {
  return (row / inner) * n * inner + row % inner;
}

// --- Softmax, LogSoftmax (direct) --------------------------------------------------

template <class T, bool kLog>
__global__ void SoftmaxRows(const T* x, T* y, int64_t rows, int64_t n, int64_t inner) {
  __shared__ T shared[kBlock];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = RowBase(row, n, inner);
    T m = -dm::Infinity<T>();
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) m = MaxOf()(m, x[base + k * inner]);
    m = BlockCombine(m, shared, MaxOf());
    T s = T(0);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) s += dm::Exp(x[base + k * inner] - m);
    s = BlockCombine(s, shared, SumOf());
    const T log_sum = dm::Log(s);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const T shifted = x[base + k * inner] - m;
      y[base + k * inner] = kLog ? shifted - log_sum : dm::Exp(shifted) / s;
    }
  }
}

unsigned RowBlocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535)); }

// The direct softmax (softmax.h): a block per row.
struct DirectSoftmax {
  template <class T, bool kLog>
  static void Run(Context& ctx, const Tensor& x, const Tensor& y, const sdk::ChannelLayout& c) {
    const int64_t rows = y.num_elements / c.channels;
    SoftmaxRows<T, kLog>
        <<<RowBlocks(rows), kBlock, 0, ctx.stream()>>>(x.as<const T>(), y.as<T>(), rows, c.channels, c.inner);
    CheckLaunch(kLog ? "LogSoftmax" : "Softmax");
  }
};

// --- Cross-entropies ---------------------------------------------------------------

// Per row i of features [batch, classes]: with m = max_j x_j and
// lse = log(sum_j exp(x_j - m)), log softmax_j = x_j - m - lse. Dense
// labels p: loss = -sum_j p_j log softmax_j, backprop = softmax - p.
// Sparse label l: loss = -log softmax_l, backprop = softmax - onehot(l).
template <class T, class L, bool kSparse>
__global__ void XentRows(const T* x, const T* dense_labels, const L* sparse_labels, T* loss, T* backprop, int64_t rows,
                         int64_t n) {
  __shared__ T shared[kBlock];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T m = -dm::Infinity<T>();
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) m = MaxOf()(m, xr[k]);
    m = BlockCombine(m, shared, MaxOf());
    T s = T(0);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) s += dm::Exp(xr[k] - m);
    s = BlockCombine(s, shared, SumOf());
    const T lse = dm::Log(s);
    T row_loss = T(0);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const T log_p = xr[k] - m - lse;
      T target;
      if constexpr (kSparse) {
        target = static_cast<int64_t>(sparse_labels[row]) == k ? T(1) : T(0);
      } else {
        target = dense_labels[row * n + k];
      }
      // 0 * log_p is 0 even where log_p is -inf.
      if (target != T(0)) row_loss -= target * log_p;
      backprop[row * n + k] = dm::Exp(log_p) - target;
    }
    row_loss = BlockCombine(row_loss, shared, SumOf());
    if (threadIdx.x == 0) loss[row] = row_loss;
  }
}

template <class T>
class SoftmaxXentKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor features = ctx.input(0), labels = ctx.input(1);
    const sdk::XentShape s = sdk::CheckXent(features, labels);
    const int64_t batch = s.batch, classes = s.classes;
    const Tensor loss = ctx.allocate_output(0, {batch});
    const Tensor backprop = ctx.allocate_output(1, features.dims);
    if (batch == 0) return;
    if (classes == 0) {
      // Nothing to normalise: a loss of 0 per row (the sum over no classes).
      Check(rt::Memset(loss.ptr, 0, loss.byte_size, ctx.stream()), "SoftmaxCrossEntropyWithLogits");
      return;
    }
    XentRows<T, int32_t, false><<<RowBlocks(batch), kBlock, 0, ctx.stream()>>>(
        features.as<const T>(), labels.as<const T>(), nullptr, loss.as<T>(), backprop.as<T>(), batch, classes);
    CheckLaunch("SoftmaxCrossEntropyWithLogits");
  }
};

template <class T, class L>
class SparseXentKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor features = ctx.input(0), labels = ctx.input(1);
    const sdk::XentShape s = sdk::CheckSparseXent(features, labels);
    const int64_t batch = s.batch, classes = s.classes;
    // A label out of range is an error naming its row, which a kernel
    // cannot report: the labels (one per row) are checked on the host.
    const std::vector<int64_t> values = ctx.ReadInts(labels);
    for (std::size_t i = 0; i < values.size(); ++i) sdk::CheckLabel(values[i], static_cast<int64_t>(i), classes);
    const Tensor loss = ctx.allocate_output(0, {batch});
    const Tensor backprop = ctx.allocate_output(1, features.dims);
    if (batch == 0) return;
    XentRows<T, L, true><<<RowBlocks(batch), kBlock, 0, ctx.stream()>>>(
        features.as<const T>(), nullptr, labels.as<const L>(), loss.as<T>(), backprop.as<T>(), batch, classes);
    CheckLaunch("SparseSoftmaxCrossEntropyWithLogits");
  }
};

template <class T>
using SoftmaxOf = SoftmaxKernel<T, false, DirectSoftmax>;
template <class T>
using LogSoftmaxOf = SoftmaxKernel<T, true, DirectSoftmax>;

template <class T>
void AddNn(KernelRegistry& r) {
  const weft_dtype_t t = DtypeOf<T>();
  r.Add<SoftmaxXentKernel<T>>("SoftmaxCrossEntropyWithLogits", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<SparseXentKernel<T, int32_t>>("SparseSoftmaxCrossEntropyWithLogits", {{"T", t}, {"Tlabels", WEFT_DTYPE_I32}});
  r.Add<SparseXentKernel<T, int64_t>>("SparseSoftmaxCrossEntropyWithLogits", {{"T", t}, {"Tlabels", WEFT_DTYPE_I64}});
}

}  // namespace

void RegisterNnKernels(KernelRegistry& r) {
  AddForTypes<BiasAddKernel, float, double, int32_t, int64_t>(r, "BiasAdd");
  ForEachType<float, double>([&](auto t) { AddNn<decltype(t)>(r); });
}

void RegisterSoftmaxKernels(KernelRegistry& r) {
  AddForTypes<SoftmaxOf, float, double>(r, "Softmax");
  AddForTypes<LogSoftmaxOf, float, double>(r, "LogSoftmax");
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_NN_H_
