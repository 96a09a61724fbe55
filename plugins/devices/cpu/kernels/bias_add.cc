// BiasAdd, with TensorFlow's semantics: a per-channel vector added to NHWC
// or NCHW data, every numeric type.
#include <type_traits>

#include "../kernel_framework.h"
#include "kernel_util.h"

namespace weft::cpu {
namespace {

// a + b; integers wrap (through the unsigned type), 16-bit floats add in float.
template <class T>
T AddBias(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return StoreAs<T>(Load(a) + Load(b));
  }
}

template <class T>
class BiasAddKernel {
 public:
  explicit BiasAddKernel(const InitContext& init) : nchw_(sdk::IsNchw(init)) {}

  void Compute(Context& ctx) {
    const Tensor value = ctx.input(0), bias = ctx.input(1);
    // value is [outer, channels, inner].
    const sdk::ChannelLayout layout = sdk::CheckBiasAdd(value, bias, nchw_);
    const int64_t outer = layout.outer, channels = layout.channels, inner = layout.inner;
    Tensor output = ctx.allocate_output(0, value.dims);
    const T* in = value.as<T>();
    const T* b = bias.as<T>();
    T* out = output.as<T>();
    if (inner == 1) {
      ParallelFor(outer, channels, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          for (int64_t c = 0; c < channels; ++c) out[i * channels + c] = AddBias(in[i * channels + c], b[c]);
        }
      });
    } else {
      ParallelFor(outer * channels, inner, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const T bc = b[row % channels];
          for (int64_t i = row * inner; i < (row + 1) * inner; ++i) out[i] = AddBias(in[i], bc);
        }
      });
    }
  }

 private:
  bool nchw_;
};

}  // namespace

void RegisterBiasAddKernels(KernelRegistry& r) {
  ForEachNumericType([&r]<class T>() {
    AddKernel<"BiasAdd", BiasAddKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
  });
}

}  // namespace weft::cpu
