// Weft SDK for C++ plugins: the checks of ops' inputs and attrs that every
// device's kernels repeat (the CPU, OpenCL, CUDA and HIP devices use
// them), with the messages of the ops' shape functions, so a shape only
// known at run time fails alike on every device.
//
//   class BiasAddF32 {
//    public:
//     explicit BiasAddF32(const weft::sdk::KernelInit& init) : nchw_(weft::sdk::IsNchw(init)) {}
//     void Compute(weft::sdk::KernelContext& ctx) {
//       const weft::sdk::Tensor value = ctx.input(0), bias = ctx.input(1);
//       const weft::sdk::ChannelLayout c = weft::sdk::CheckBiasAdd(value, bias, nchw_);
//       const weft::sdk::Tensor out = ctx.allocate_output(0, value.dims);
//       (void)c;    // value is [c.outer, c.channels, c.inner] around its channel axis
//       (void)out;  // out[o, k, i] = value[o, k, i] + bias[k]
//     }
//
//    private:
//     bool nchw_;
//   };
//
// Every check throws weft::sdk::Error (INVALID_ARGUMENT) through Fail.
// Tensors are any type with dims, rank() and dim(i) (weft::sdk::Tensor or
// a plugin's own).
#ifndef WEFT_SDK_OP_CHECKS_H_
#define WEFT_SDK_OP_CHECKS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/sdk/kernel.h"

namespace weft::sdk {

// --- Attrs and axes ----------------------------------------------------------

// Whether the node's data_format attr is NCHW (NHWC otherwise).
inline bool IsNchw(const KernelInit& init) { return init.String("data_format") == "NCHW"; }

// |axis| in [0, rank), counting negative values from the end; |what| names
// the attr in the message.
inline int NormalizeAxis(int64_t axis, int rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank) {
    Fail(what, " ", axis, " is out of range for rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")");
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// A tensor seen as [outer, channels, inner] around its axis |axis|.
struct ChannelLayout {
  int axis = 0;
  int64_t outer = 1, channels = 0, inner = 1;
};

template <class TensorT>
ChannelLayout ChannelLayoutOf(const TensorT& t, int axis) {
  ChannelLayout c;
  c.axis = axis;
  c.channels = t.dim(axis);
  for (int i = 0; i < axis; ++i) c.outer *= t.dim(i);
  for (int i = axis + 1; i < t.rank(); ++i) c.inner *= t.dim(i);
  return c;
}

// --- Elementwise -------------------------------------------------------------

// The inputs of AddN, which must all have one shape.
template <class Context>
auto AddNInputs(Context& ctx) {
  const int n = ctx.num_inputs();
  std::vector<decltype(ctx.input(0))> inputs;
  for (int i = 0; i < n; ++i) inputs.push_back(ctx.input(i));
  for (int i = 1; i < n; ++i) {
    if (inputs[static_cast<std::size_t>(i)].dims != inputs[0].dims) {
      Fail("AddN inputs must have one shape: input 0 is ", DimsString(inputs[0].dims), ", input ", i, " is ",
           DimsString(inputs[static_cast<std::size_t>(i)].dims));
    }
  }
  return inputs;
}

// BroadcastTo's input of shape |in| onto |target|: each dimension of |in|,
// aligned on the last ones, must be 1 or the target's.
inline void CheckBroadcastTo(const Dims& in, const Dims& target) {
  if (in.size() > target.size()) {
    Fail("input of shape ", DimsString(in), " cannot be broadcast to ", DimsString(target),
         ", which has fewer dimensions");
  }
  const std::size_t lead = target.size() - in.size();
  for (std::size_t i = 0; i < in.size(); ++i) {
    const int64_t d = in[i], t = target[lead + i];
    if (d != 1 && d != t) {
      Fail("input of shape ", DimsString(in), " cannot be broadcast to ", DimsString(target), ": its dimension ", i,
           " is ", d, ", not 1 or ", t);
    }
  }
}

// --- Matrix products ---------------------------------------------------------

// The sizes of a product op(a) op(b): op(a) is [m, k] and op(b) [k, n].
struct MatMulShape {
  int64_t m = 0, k = 0, n = 0;
};

// The product of matrices of shapes |a| and |b| (rank 2), each transposed
// when its flag says so; throws when the inner dimensions differ.
inline MatMulShape MatMulDims(const Dims& a, const Dims& b, bool ta, bool tb) {
  const MatMulShape s{a[ta ? 1 : 0], a[ta ? 0 : 1], b[tb ? 0 : 1]};
  const int64_t kb = b[tb ? 1 : 0];
  if (s.k != kb) {
    Fail("inner dimensions differ: ", DimsString(a), ta ? "^T" : "", " x ", DimsString(b), tb ? "^T" : "", " (", s.k,
         " vs ", kb, ")");
  }
  return s;
}

// MatMul's a and b: rank 2, a transposed when |ta|, b when |tb|.
template <class TensorT>
MatMulShape CheckMatMul(const TensorT& a, const TensorT& b, bool ta, bool tb) {
  if (a.rank() != 2 || b.rank() != 2) {
    Fail("MatMul takes rank-2 tensors, got ", DimsString(a.dims), " and ", DimsString(b.dims));
  }
  return MatMulDims(a.dims, b.dims, ta, tb);
}

// BatchMatMul's products: x [..., m, k] and y [..., k, n] (the last two
// dimensions swapped when adjoint), their batch dimensions broadcast as
// NumPy's matmul broadcasts them.
struct BatchMatMulShape : MatMulShape {
  Dims x_batch, y_batch;                        // the operands' batch dimensions
  Dims batch;                                   // their broadcast, the output's
  int64_t x_count = 1, y_count = 1, count = 1;  // matrices in x, y and the output

  // batch, then [m, n].
  Dims OutputDims() const {
    Dims out = batch;
    out.push_back(m);
    out.push_back(n);
    return out;
  }

  // Calls f(i, xi, yi) for each output matrix i in order, with the indices
  // of the x and y matrices it is the product of.
  template <class F>
  void ForEachMatrix(F&& f) const {
    if (count == 0) return;
    const BroadcastLayout plan = PlanBroadcast(batch.empty() ? Dims{1} : batch, {&x_batch, &y_batch});
    for (int64_t i = 0; i < count; ++i) {
      int64_t rest = i, xi = 0, yi = 0;
      for (std::size_t d = plan.dims.size(); d-- > 0;) {
        const int64_t coord = rest % plan.dims[d];
        rest /= plan.dims[d];
        xi += coord * plan.strides[0][d];
        yi += coord * plan.strides[1][d];
      }
      f(i, xi, yi);
    }
  }
};

template <class TensorT>
BatchMatMulShape CheckBatchMatMul(const TensorT& x, const TensorT& y, bool adj_x, bool adj_y) {
  if (x.rank() < 2 || y.rank() < 2) {
    Fail("BatchMatMul takes rank >= 2, got ", DimsString(x.dims), " and ", DimsString(y.dims));
  }
  BatchMatMulShape s;
  s.m = x.dim(x.rank() - (adj_x ? 1 : 2));
  s.k = x.dim(x.rank() - (adj_x ? 2 : 1));
  const int64_t ky = y.dim(y.rank() - (adj_y ? 1 : 2));
  s.n = y.dim(y.rank() - (adj_y ? 2 : 1));
  if (s.k != ky)
    Fail("inner dimensions differ: ", DimsString(x.dims), " x ", DimsString(y.dims), " (", s.k, " vs ", ky, ")");
  s.x_batch.assign(x.dims.begin(), x.dims.end() - 2);
  s.y_batch.assign(y.dims.begin(), y.dims.end() - 2);
  s.batch = BroadcastDims(s.x_batch, s.y_batch);
  for (int64_t d : s.x_batch) s.x_count *= d;
  for (int64_t d : s.y_batch) s.y_count *= d;
  for (int64_t d : s.batch) s.count *= d;
  return s;
}

// --- Neural networks ---------------------------------------------------------

// BiasAdd's value (rank >= 2) and bias (one element per channel of value,
// the second dimension in NCHW, the last otherwise): value's layout around
// its channel axis.
template <class TensorT>
ChannelLayout CheckBiasAdd(const TensorT& value, const TensorT& bias, bool nchw) {
  if (value.rank() < 2) Fail("value must have rank >= 2, got ", DimsString(value.dims));
  if (bias.rank() != 1) Fail("bias must be 1-D, got ", DimsString(bias.dims));
  const ChannelLayout c = ChannelLayoutOf(value, nchw ? 1 : value.rank() - 1);
  if (bias.dim(0) != c.channels) {
    Fail("bias has ", bias.dim(0), " elements but value has ", c.channels, " channels (", DimsString(value.dims), ", ",
         nchw ? "NCHW" : "NHWC", ")");
  }
  return c;
}

// BiasAddGrad's out_backprop (rank >= 2): its layout around the channel axis.
template <class TensorT>
ChannelLayout CheckBiasAddGrad(const TensorT& dy, bool nchw) {
  if (dy.rank() < 2) Fail("out_backprop must have rank >= 2, got ", DimsString(dy.dims));
  return ChannelLayoutOf(dy, nchw ? 1 : dy.rank() - 1);
}

// The axis of Softmax or LogSoftmax over |x|, given its axis attr.
template <class TensorT>
int SoftmaxAxis(const TensorT& x, int64_t axis) {
  if (x.rank() < 1) Fail("logits must have rank >= 1");
  return NormalizeAxis(axis, x.rank());
}

// The shape of a cross-entropy's features: [batch, classes].
struct XentShape {
  int64_t batch = 0, classes = 0;
};

// SoftmaxCrossEntropyWithLogits: features [batch, classes] and labels of
// the same shape.
template <class TensorT>
XentShape CheckXent(const TensorT& features, const TensorT& labels) {
  if (features.rank() != 2) Fail("features must be [batch, classes], got ", DimsString(features.dims));
  if (labels.dims != features.dims) {
    Fail("labels ", DimsString(labels.dims), " must have the shape of features ", DimsString(features.dims));
  }
  return {features.dim(0), features.dim(1)};
}

// SparseSoftmaxCrossEntropyWithLogits: features [batch, classes] and labels
// [batch] (each in [0, classes), see CheckLabel).
template <class TensorT>
XentShape CheckSparseXent(const TensorT& features, const TensorT& labels) {
  if (features.rank() != 2) Fail("features must be [batch, classes], got ", DimsString(features.dims));
  if (labels.rank() != 1) Fail("labels must be [batch], got ", DimsString(labels.dims));
  const XentShape s{features.dim(0), features.dim(1)};
  if (labels.dim(0) != s.batch) Fail("labels has ", labels.dim(0), " rows, features ", s.batch);
  return s;
}

// The label of row |row| of a sparse cross-entropy.
template <class Label>
void CheckLabel(Label label, int64_t row, int64_t classes) {
  if (label < 0 || label >= classes) Fail("label ", label, " of row ", row, " is out of range [0, ", classes, ")");
}

// The attrs of FusedBatchNorm and FusedBatchNormGrad.
struct BatchNormAttrs {
  double epsilon = 0;
  bool training = false;
  bool nchw = false;
};

inline BatchNormAttrs ReadBatchNormAttrs(const KernelInit& init) {
  BatchNormAttrs a;
  a.epsilon = init.Float("epsilon");
  a.training = init.Bool("is_training");
  a.nchw = IsNchw(init);
  return a;
}

// A batch normalisation's x (named |what|), of rank 2 or 4: its layout
// around the channel axis, axis 1 of NCHW data of rank 4, the last
// otherwise.
template <class TensorT>
ChannelLayout BatchNormLayout(const TensorT& x, const char* what, bool nchw) {
  if (x.rank() != 2 && x.rank() != 4) Fail(what, " must have rank 2 or 4, got ", DimsString(x.dims));
  return ChannelLayoutOf(x, x.rank() == 4 && nchw ? 1 : x.rank() - 1);
}

// FusedBatchNormGrad's y_backprop |dy| and x, of one shape: x's layout.
template <class TensorT>
ChannelLayout BatchNormGradLayout(const TensorT& dy, const TensorT& x, bool nchw) {
  const ChannelLayout c = BatchNormLayout(dy, "y_backprop", nchw);
  if (x.dims != dy.dims) {
    Fail("y_backprop has shape ", DimsString(dy.dims), ", but x has shape ", DimsString(x.dims),
         "; they must be equal");
  }
  return c;
}

// A per-channel input of a batch normalisation (scale, offset, mean,
// variance), named |what|: 1-D, one element per channel.
template <class TensorT>
void RequireChannelInput(const TensorT& p, const std::string& what, int64_t channels) {
  if (p.rank() != 1) Fail(what, " must be 1-D, got ", DimsString(p.dims));
  if (p.dim(0) != channels) Fail(what, " has ", p.dim(0), " elements, x has ", channels, " channels");
}

}  // namespace weft::sdk

#endif  // WEFT_SDK_OP_CHECKS_H_
