// ONNX's signal operators (opset 17) composed of Weft ops: the window
// functions HannWindow, HammingWindow and BlackmanWindow over Range(size),
// and DFT and STFT as products with cos and sin matrices built from Range
// (sizes known or fed; the conventions are in core/onnx/converters.h).
#include <numbers>
#include <utility>

#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

// a0 - a1 cos(2 pi n / N') + a2 cos(4 pi n / N') for n in [0, size), with
// N' = size (periodic) or size - 1 (symmetric), computed in f64 and cast
// to attr 'output_datatype'.
Status Window(NodeContext& c, double a0, double a1, double a2) {
  WEFT_ASSIGN_OR_RETURN(Output size_in, c.In(0));
  if (!IsInteger(size_in.dtype())) return c.Error("size must be an integer, got ", DTypeName(size_in.dtype()));
  auto to = DTypeFromOnnx(static_cast<int32_t>(c.Int("output_datatype", 1)));
  if (!to.ok()) return to.status().WithContext("attr 'output_datatype'");
  Output size = Op(c, "Cast", {AsScalar(c, size_in, "size")}, {{"DstT", AttrValue(DType::kF64)}}, "size_f64");
  Output n = Op(c, "Range",
                {ConstOf(c, Tensor::Scalar<double>(0.0), "zero"), size, ConstOf(c, Tensor::Scalar<double>(1.0), "one")},
                {}, "n");
  Output period = size;
  if (c.Int("periodic", 1) == 0) {
    period = Op(c, "Sub", {size, ConstOf(c, Tensor::Scalar<double>(1.0), "one_less")}, {}, "period");
  }
  Output phase =
      Op(c, "Div",
         {Op(c, "Mul", {n, ConstOf(c, Tensor::Scalar<double>(2 * std::numbers::pi), "two_pi")}, {}, "angle"), period},
         {}, "phase");
  Output w =
      Op(c, "Sub",
         {ConstOf(c, Tensor::Scalar<double>(a0), "a0"),
          Op(c, "Mul", {ConstOf(c, Tensor::Scalar<double>(a1), "a1"), Op(c, "Cos", {phase}, {}, "cos1")}, {}, "term1")},
         {}, "w1");
  if (a2 != 0) {
    Output second = Op(c, "Cos", {Op(c, "Add", {phase, phase}, {}, "phase2")}, {}, "cos2");
    w = Op(c, "Add", {w, Op(c, "Mul", {ConstOf(c, Tensor::Scalar<double>(a2), "a2"), second}, {}, "term2")}, {}, "w2");
  }
  c.SetOut(0, *to == DType::kF64 ? Op(c, "Identity", {w}) : Op(c, "Cast", {w}, {{"DstT", AttrValue(*to)}}));
  return Status();
}

// The DFT along the last axis of real part |xr| and imaginary part |xi|
// (invalid: zero) for a length |n| and |n_out| bins (i64 scalars, known or
// computed at run time), as products with cos and sin matrices built from
// Range: forward X_k = sum_j x_j e^{-2 pi i jk/n}; inverse with e^{+...}/n.
std::pair<Output, Output> LastAxisDft(NodeContext& c, const Output& xr, const Output& xi, const Output& n,
                                      const Output& n_out, bool inverse, int rank) {
  const DType dt = xr.dtype();
  auto f64 = [&](const Output& v, const char* name) {
    return Op(c, "Cast", {v}, {{"DstT", AttrValue(DType::kF64)}}, name);
  };
  Output zero = ConstOf(c, Tensor::Scalar<int64_t>(0), "dft_zero"),
         one = ConstOf(c, Tensor::Scalar<int64_t>(1), "dft_one");
  Output j = Op(c, "Reshape",
                {f64(Op(c, "Range", {zero, n, one}, {}, "dft_j"), "dft_j_f64"), ConstOf(c, Int64s({-1, 1}), "dft_col")},
                {}, "dft_j_col");
  Output k =
      Op(c, "Reshape",
         {f64(Op(c, "Range", {zero, n_out, one}, {}, "dft_k"), "dft_k_f64"), ConstOf(c, Int64s({1, -1}), "dft_row")},
         {}, "dft_k_row");
  Output step = Op(c, "Div", {ConstOf(c, Tensor::Scalar<double>(2 * std::numbers::pi), "two_pi"), f64(n, "dft_n_f64")},
                   {}, "dft_step");
  Output angle = Op(c, "Mul", {Op(c, "Mul", {j, k}, {}, "dft_jk"), step}, {}, "dft_angle");
  auto matrix = [&](const char* fn) {
    Output m = Op(c, fn, {angle}, {}, StrCat("dft_", fn));
    return dt == DType::kF64 ? m : Op(c, "Cast", {m}, {{"DstT", AttrValue(dt)}}, StrCat("dft_", fn, "_cast"));
  };
  const Output cosm = matrix("Cos"), sinm = matrix("Sin");
  // [..., n] as [-1, n] rows, and the bins back as [..., n_out].
  Output in_shape = Op(c, "Shape", {xr}, {{"out_type", AttrValue(DType::kI64)}}, "dft_in_shape");
  Output lead = Op(c, "Slice", {in_shape},
                   {{"begin", AttrValue(std::vector<int64_t>{0})}, {"size", AttrValue(std::vector<int64_t>{rank - 1})}},
                   "dft_lead");
  Output n1 = Op(c, "Reshape", {n, ConstOf(c, Int64s({1}), "dft_one_shape")}, {}, "dft_n_1");
  Output out1 = Op(c, "Reshape", {n_out, ConstOf(c, Int64s({1}), "dft_one_shape2")}, {}, "dft_out_1");
  Output rows_shape = Op(c, "Concat", {ConstOf(c, Int64s({-1}), "dft_minus_one"), n1},
                         {{"axis", AttrValue(int64_t{0})}}, "dft_rows_shape");
  Output out_shape = Op(c, "Concat", {lead, out1}, {{"axis", AttrValue(int64_t{0})}}, "dft_out_shape");
  auto product = [&](const Output& x, const Output& m, const std::string& name) {
    Output rows = Op(c, "Reshape", {x, rows_shape}, {}, name + "_rows");
    return Op(c, "Reshape", {Op(c, "MatMul", {rows, m}, {}, name + "_mm"), out_shape}, {}, name);
  };
  Output rc = product(xr, cosm, "dft_rc"), rs = product(xr, sinm, "dft_rs");
  Output yr = rc, yi = Op(c, "Neg", {rs}, {}, "dft_minus_rs");
  if (xi.valid()) {
    Output ic = product(xi, cosm, "dft_ic"), is = product(xi, sinm, "dft_is");
    yr = Op(c, inverse ? "Sub" : "Add", {rc, is}, {}, "dft_real");
    yi = inverse ? Op(c, "Add", {ic, rs}, {}, "dft_imag") : Op(c, "Sub", {ic, rs}, {}, "dft_imag");
  } else if (inverse) {
    yi = rs;
  }
  if (inverse) {
    Output nf = Op(c, "Cast", {n}, {{"DstT", AttrValue(dt)}}, "dft_n_cast");
    yr = Op(c, "Div", {yr, nf}, {}, "dft_real_scaled");
    yi = Op(c, "Div", {yi, nf}, {}, "dft_imag_scaled");
  }
  return {yr, yi};
}

// The real and imaginary parts of a [..., 1 | 2] signal (imaginary invalid
// for real input).
Expected<std::pair<Output, Output>> SplitComplex(NodeContext& c, const Output& x, int rank) {
  const int64_t parts = x.shape().dim(rank - 1);
  if (parts != 1 && parts != 2)
    return c.Error("the last axis must be 1 (real) or 2 (complex), got ", x.shape().ToString());
  const AttrMap last = {{"axis", AttrValue(int64_t{rank - 1})}};
  if (parts == 1) {
    return std::make_pair(Op(c, "Squeeze", {x}, {{"axis", AttrValue(std::vector<int64_t>{rank - 1})}}, "real"),
                          Output());
  }
  return std::make_pair(Op(c, "Gather", {x, ConstOf(c, Tensor::Scalar<int64_t>(0), "re_index")}, last, "real"),
                        Op(c, "Gather", {x, ConstOf(c, Tensor::Scalar<int64_t>(1), "im_index")}, last, "imag"));
}

// DFT (opset 17) along 'axis' of a [..., 1 | 2] signal of static length,
// onesided and inverse; not dft_length.
Status Dft(NodeContext& c) {
  if (c.has_input(1)) return c.Unsupported("DFT with dft_length");
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = c.InShape(0);
  const int rank = xs.rank();
  if (rank < 2) return c.Error("input must be [..., n, ..., 1 | 2], got ", xs.ToString());
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", 1), rank, "attr 'axis'"));
  if (axis == rank - 1) return c.Error("attr 'axis' names the real/imaginary axis");
  const int64_t n = xs.dim(static_cast<int>(axis));
  if (n < 1) return c.Unsupported("DFT over an axis of unknown or zero length");
  const bool inverse = c.Int("inverse", 0) != 0, onesided = c.Int("onesided", 0) != 0;
  if (inverse && onesided) return c.Error("inverse and onesided together are not defined");
  WEFT_ASSIGN_OR_RETURN(auto parts, SplitComplex(c, x, rank));
  // The DFT axis moved last among the signal's axes.
  std::vector<int64_t> perm, back(static_cast<std::size_t>(rank - 1));
  for (int64_t a = 0; a < rank - 1; ++a) {
    if (a != axis) perm.push_back(a);
  }
  perm.push_back(axis);
  for (std::size_t i = 0; i < perm.size(); ++i) back[static_cast<std::size_t>(perm[i])] = static_cast<int64_t>(i);
  auto moved = [&](const Output& v, const char* name) {
    return v.valid() ? Op(c, "Transpose", {v}, {{"perm", AttrValue(perm)}}, name) : v;
  };
  const int64_t bins = onesided ? n / 2 + 1 : n;
  auto [yr, yi] = LastAxisDft(c, moved(parts.first, "real_moved"), moved(parts.second, "imag_moved"),
                              ConstOf(c, Tensor::Scalar<int64_t>(n), "n"),
                              ConstOf(c, Tensor::Scalar<int64_t>(bins), "bins"), inverse, rank - 1);
  Output y = Op(c, "Pack", {yr, yi}, {{"axis", AttrValue(int64_t{-1})}}, "packed");
  back.push_back(rank - 1);
  c.SetOut(0, Op(c, "Transpose", {y}, {{"perm", AttrValue(back)}}));
  return Status();
}

// STFT (opset 17) of a [batch, length, 1 | 2] signal: frames of
// frame_length (the window's length, or the input) every frame_step (known
// or fed), times the window, then the DFT of each frame, onesided by default.
Status Stft(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  if (c.InShape(0).rank() != 3) return c.Error("signal must be [batch, length, 1 | 2], got ", c.InShape(0).ToString());
  WEFT_ASSIGN_OR_RETURN(Output step_in, c.In(1));
  WEFT_ASSIGN_OR_RETURN(Output step, ScalarI64(c, step_in, "frame_step"));
  Output window, length;
  if (c.has_input(2)) {
    WEFT_ASSIGN_OR_RETURN(window, c.In(2));
    length = Op(c, "Size", {window}, {{"out_type", AttrValue(DType::kI64)}}, "window_length");
  } else if (c.has_input(3)) {
    WEFT_ASSIGN_OR_RETURN(Output fl, c.In(3));
    WEFT_ASSIGN_OR_RETURN(length, ScalarI64(c, fl, "frame_length"));
  } else {
    return c.Error("needs a window or a frame_length");
  }
  Output zero = ConstOf(c, Tensor::Scalar<int64_t>(0), "zero"), one = ConstOf(c, Tensor::Scalar<int64_t>(1), "one");
  Output total = Op(c, "Gather", {Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "signal_shape"), one}, {},
                    "signal_length");
  Output frames = Op(c, "Add", {Op(c, "FloorDiv", {Op(c, "Sub", {total, length}, {}, "span"), step}, {}, "steps"), one},
                     {}, "frames");
  // index [F, L] = f * step + j: the frames gathered along the length axis.
  Output starts = Op(c, "Reshape",
                     {Op(c, "Mul", {Op(c, "Range", {zero, frames, one}, {}, "f"), step}, {}, "starts"),
                      ConstOf(c, Int64s({-1, 1}), "col")},
                     {}, "starts_col");
  Output offsets = Op(c, "Reshape", {Op(c, "Range", {zero, length, one}, {}, "j"), ConstOf(c, Int64s({1, -1}), "row")},
                      {}, "offsets_row");
  Output cut = Op(c, "Gather", {x, Op(c, "Add", {starts, offsets}, {}, "index")}, {{"axis", AttrValue(int64_t{1})}},
                  "framed");  // [B, F, L, 1 | 2]
  WEFT_ASSIGN_OR_RETURN(auto parts, SplitComplex(c, cut, 4));
  Output xr = parts.first, xi = parts.second;
  if (window.valid()) {
    xr = Op(c, "Mul", {xr, window}, {}, "real_windowed");
    if (xi.valid()) xi = Op(c, "Mul", {xi, window}, {}, "imag_windowed");
  }
  Output bins = length;
  if (c.Int("onesided", 1) != 0) {
    bins = Op(c, "Add", {Op(c, "FloorDiv", {length, ConstOf(c, Tensor::Scalar<int64_t>(2), "two")}, {}, "half"), one},
              {}, "bins");
  }
  auto [yr, yi] = LastAxisDft(c, xr, xi, length, bins, false, 3);
  c.SetOut(0, Op(c, "Pack", {yr, yi}, {{"axis", AttrValue(int64_t{-1})}}));
  return Status();
}

}  // namespace

void AddSignalConverters(ConverterTable& t) {
  t["DFT"] = Dft;
  t["STFT"] = Stft;
  t["HannWindow"] = [](NodeContext& c) { return Window(c, 0.5, 0.5, 0.0); };
  t["HammingWindow"] = [](NodeContext& c) { return Window(c, 25.0 / 46.0, 21.0 / 46.0, 0.0); };
  t["BlackmanWindow"] = [](NodeContext& c) { return Window(c, 0.42, 0.5, 0.08); };
}

}  // namespace weft::onnx_io::convert
