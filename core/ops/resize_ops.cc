// Resize: ONNX's Resize (opset 13) with its scales or sizes as run-time
// tensors. Nearest, linear and cubic interpolation along every axis, with
// ONNX's coordinate transformations, rounding modes, cubic coefficient,
// exclude_outside and tf_crop_and_resize's region and extrapolation value.
//
// When the input that gives the output's size (sizes, or scales when sizes
// is empty) is a constant, the shape function computes the exact output
// shape and refuses what the kernel refuses, in the same words
// (plugins/devices/cpu/kernels/resize.cc repeats every check); otherwise
// the output has x's rank and unknown dimensions.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

constexpr const char* kBothEmpty =
    "scales and sizes are both empty: one of them must give the output's size, with an entry per dimension of x";

// The length of input |i| (named |what|), which must be 1-D: -1 when its
// shape is not known.
Expected<int64_t> VectorLength(InferenceContext& c, int i, const char* what) {
  const Shape& s = c.input_shape(i);
  if (s.unknown_rank()) return int64_t{-1};
  if (s.rank() != 1) return c.Error(what, " must be a 1-D tensor, got shape ", s.ToString());
  return s.dim(0);
}

// The values of the constant f32 vector input |i|, or nullopt.
std::optional<std::vector<float>> ConstFloats(const InferenceContext& c, int i) {
  const Tensor* t = c.input_value(i);
  if (t == nullptr || t->rank() != 1 || t->dtype() != DType::kF32) return std::nullopt;
  return std::vector<float>(t->data<float>(), t->data<float>() + t->num_elements());
}

// Output dimension |i| for input size |in| (-1 when unknown) by |size|,
// checked as the kernel checks it.
Expected<int64_t> SizedDim(InferenceContext& c, int i, int64_t in, int64_t size) {
  if (size < 0) return c.Error("sizes must be >= 0, got ", size, " for dimension ", i);
  if (in == 0 && size > 0) {
    return c.Error("cannot resize dimension ", i, " of size 0 to ", size, ": it has no elements to interpolate");
  }
  return size;
}

// Output dimension |i| for input size |in| (-1 when unknown) by |scale|:
// floor(in * scale) computed in f32, as ONNX runtimes compute it.
Expected<int64_t> ScaledDim(InferenceContext& c, int i, int64_t in, float scale) {
  if (!(scale > 0)) return c.Error("scales must be > 0, got ", scale, " for dimension ", i);
  if (in < 0) return int64_t{-1};
  const float length = static_cast<float>(in) * scale;
  if (!(length < 9223372036854775808.0f)) {
    return c.Error("scale ", scale, " makes dimension ", i, " of size ", in, " too large (", length,
                   " does not fit in 64 bits)");
  }
  return static_cast<int64_t>(std::floor(length));
}

// Which of scales and sizes gives the output's size, as far as is known.
enum class Source { kUnknown, kScales, kSizes };

Status ResizeShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(int64_t n_scales, VectorLength(c, 2, "scales"));
  WEFT_ASSIGN_OR_RETURN(int64_t n_sizes, VectorLength(c, 3, "sizes"));
  if (n_scales == 0 && n_sizes == 0) return c.Error(kBothEmpty);
  const Source source = n_sizes > 0 ? Source::kSizes : n_sizes == 0 ? Source::kScales : Source::kUnknown;
  const int64_t n = source == Source::kSizes ? n_sizes : source == Source::kScales ? n_scales : -1;
  const Shape& x = c.input_shape(0);
  if (!x.unknown_rank() && n >= 0 && n != x.rank()) {
    return c.Error(source == Source::kSizes ? "sizes" : "scales", " has ", n, " entries for x of rank ", x.rank());
  }
  const int64_t rank = x.unknown_rank() ? n : x.rank();
  if (c.String("coordinate_transformation_mode") == "tf_crop_and_resize") {
    WEFT_ASSIGN_OR_RETURN(int64_t n_roi, VectorLength(c, 1, "roi"));
    if (rank >= 0 && n_roi >= 0 && n_roi != 2 * rank) {
      return c.Error("roi has ", n_roi, " entries for x of rank ", rank, "; tf_crop_and_resize needs ", 2 * rank,
                     " (every dimension's start, then every dimension's end)");
    }
  }
  if (rank < 0) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  std::vector<int64_t> dims(static_cast<std::size_t>(rank), -1);
  const auto sizes = source == Source::kSizes ? ConstIntVector(c, 3) : std::nullopt;
  const auto scales = source == Source::kScales ? ConstFloats(c, 2) : std::nullopt;
  for (int i = 0; i < rank && (sizes || scales); ++i) {
    const auto k = static_cast<std::size_t>(i);
    const int64_t in = x.unknown_rank() ? -1 : x.dim(i);
    if (sizes) {
      WEFT_ASSIGN_OR_RETURN(dims[k], SizedDim(c, i, in, (*sizes)[k]));
    } else {
      WEFT_ASSIGN_OR_RETURN(dims[k], ScaledDim(c, i, in, (*scales)[k]));
    }
  }
  c.set_output(0, Shape(dims));
  return Status();
}

}  // namespace

Status RegisterResizeOps(OpRegistry& r) {
  return r.Register(
      OpDefBuilder("Resize")
          .Input("x: T")
          .Input("roi: f32")
          .Input("scales: f32")
          .Input("sizes: i64")
          .Output("y: T")
          .Attr("T: {float}")
          .Attr("mode: {'nearest', 'linear', 'cubic'} = 'nearest'")
          .Attr("coordinate_transformation_mode: {'half_pixel', 'pytorch_half_pixel', 'align_corners', 'asymmetric', "
                "'tf_half_pixel_for_nn', 'tf_crop_and_resize'} = 'half_pixel'")
          .Attr("nearest_mode: {'round_prefer_floor', 'round_prefer_ceil', 'floor', 'ceil'} = 'round_prefer_floor'")
          .Attr("cubic_coeff_a: float = -0.75")
          .Attr("exclude_outside: bool = false")
          .Attr("extrapolation_value: float = 0")
          .Shape(ResizeShape)
          .Doc("ONNX's Resize (opset 13) with run-time scales or sizes. sizes (one entry >= 0 per dimension of x) "
               "gives the output's shape when it has entries; else scales (one entry > 0 per dimension) does, each "
               "output dimension being floor(in * scale) computed in f32. An empty tensor stands for an absent "
               "input. Along each axis, output index i samples x at a coordinate of coordinate_transformation_mode "
               "(with s the scale, out/in for sizes, and L = in * s the resized length): half_pixel (i + 0.5) / s - "
               "0.5; pytorch_half_pixel the same when L > 1, else 0; align_corners i * (in - 1) / (L - 1) when L > 1, "
               "else 0; asymmetric i / s; tf_half_pixel_for_nn (i + 0.5) / s; tf_crop_and_resize start * (in - 1) + "
               "i * (end - start) * (in - 1) / (L - 1) when L > 1, else (start + end) / 2 * (in - 1), from roi = "
               "[starts..., ends...] (normalized), with extrapolation_value where the coordinate is outside [0, in - "
               "1]. mode nearest takes the element nearest_mode rounds to; linear interpolates the two neighbours "
               "of the coordinate clamped to [0, in - 1]; cubic weighs the four neighbours floor(c) - 1 to "
               "floor(c) + 2 with Keys' kernel of coefficient cubic_coeff_a, or with exclude_outside those inside "
               "x, renormalised. Indices past the edge take the edge element, and a weight of 0 takes no part (an "
               "output at an input's position is that input, even beside inf or NaN). sizes wins when both have "
               "entries. N-D interpolation is separable: one axis after another (those that shrink most first), "
               "in f64, rounded to T once. Not differentiable."));
}

}  // namespace weft::ops
